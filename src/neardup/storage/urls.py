"""Store URLs as they may be shown: one redaction for every layer (messages, logs, ``repr``,
``index stats``, the service), so a password typed into a URL never reaches a screen.

A password can sit in the user part (``postgresql://user:PASSWORD@host/db``) or in a query
option (``redis://host/0?password=PASSWORD``, ``mongodb://…?authMechanismProperties=…``);
both are masked as ``***``. Everything else (scheme, user, host, port, path, other options)
is kept, because that is what tells a reader which store is meant.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit, urlunsplit

#: Query options whose values are secrets, compared case-insensitively.
SECRET_OPTIONS = frozenset(
    ("password", "pass", "passwd", "pwd", "secret", "token", "sslpassword", "authmechanismproperties")
)
MASK = "***"


def redacted(url: str | SplitResult) -> str:
    """``url`` with every password in it masked, for messages, logs and answers."""
    parts = urlsplit(url) if isinstance(url, str) else url
    netloc = parts.netloc
    user_info, at, host = netloc.rpartition("@")
    if at and ":" in user_info:
        user_info = user_info.split(":", 1)[0] + ":" + MASK
        netloc = f"{user_info}@{host}"
    query = "&".join(_masked_option(option) for option in parts.query.split("&")) if parts.query else ""
    if netloc == parts.netloc and query == parts.query:
        # urlunsplit would drop the empty authority of sqlite:///path and memory://.
        return url if isinstance(url, str) else parts.geturl()
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _masked_option(option: str) -> str:
    name, equals, _value = option.partition("=")
    return f"{name}={MASK}" if equals and name.lower() in SECRET_OPTIONS else option
