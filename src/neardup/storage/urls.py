"""Store URLs: the one parser every backend's URL goes through, and the one redaction for
every layer (messages, logs, ``repr``, ``index stats``, the service), so a password typed
into a URL never reaches a screen.

A password can sit in the user part (``postgresql://user:PASSWORD@host/db``) or in a query
option (``redis://host/0?password=PASSWORD``, ``mongodb://…?authMechanismProperties=…``);
both are masked as ``***``. Everything else (scheme, user, host, port, path, other options)
is kept, because that is what tells a reader which store is meant.

Redaction works on the text, not on a parse, because the URLs that most need it are the
malformed ones: a password holding an unescaped ``@ / ? #`` or a space makes a parser cut
the URL in the wrong place and show the rest of the password as a host, a path or a query.
So the user part runs to the *last* ``@``; when that reaches past where a parser would end
the host, more than the password may be masked, never less. :func:`parse_store_url` then
refuses such a URL with the fix (percent-encode), instead of connecting somewhere else.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, quote, unquote, unquote_plus, urlsplit

from ..errors import ConfigError

#: Query options whose values are secrets, compared case-insensitively.
SECRET_OPTIONS = frozenset(
    ("password", "pass", "passwd", "pwd", "secret", "token", "sslpassword", "authmechanismproperties")
)
MASK = "***"
#: Schemes whose URL names no server: no user, host or port to check.
LOCAL_SCHEMES = frozenset(("sqlite", "memory"))
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]*")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODE_HINT = (
    "percent-encode them in the URL (%40 for '@', %2F for '/', %3F for '?', %23 for '#', %20 for a space)"
)
#: The largest Redis database number (the server's ``databases`` setting is an int).
MAX_REDIS_DATABASE = 2**31 - 1


def redacted(url: str | SplitResult) -> str:
    """``url`` with every password in it masked, for messages, logs and answers; never
    raises, however malformed the URL."""
    text = url if isinstance(url, str) else url_text(url)
    if "://" in text and not _SCHEME.match(text):  # a message quoting URLs
        return _URL_IN_TEXT.sub(lambda found: redacted(found.group(0)), text)
    head, user_info, rest = _cut(text)
    if user_info is not None:
        user, colon, _password = user_info.partition(":")
        if colon:
            user_info = f"{user}:{MASK}"
        rest = f"{user_info}@{rest}"
    return head + _masked_query(rest)


def parse_store_url(url: str, what: str = "store URL") -> SplitResult:
    """The parts of a store URL (``scheme://…``), checked so that no backend's driver meets a
    URL it would read otherwise than neardup or fail on with a traceback: an unclosed IPv6
    ``[``, a port outside 1-65535, a user or password holding unescaped ``/ ? #``, a space
    or a stray ``%``, a ``#fragment``, a Redis database that is not a number (an unescaped
    ``@`` in the password is taken, and passed on percent-encoded). Errors are
    :class:`~neardup.errors.ConfigError` naming the redacted URL (as ``what``) and the fix."""
    shown = f"{what} {redacted(url)}"
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(_host_problem(url, shown) or f"{shown} does not parse ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme in LOCAL_SCHEMES:
        return parts
    _head, user_info, _rest = _cut(url)
    strict_user_info, at, host = parts.netloc.rpartition("@")
    if user_info is not None and (not at or len(user_info) > len(strict_user_info)):
        # The user part reaches past the host a parser sees: "u:p/w@host" read as host "u".
        raise ConfigError(
            f"{shown} has an '@' after its host part, so its user name or password "
            f"seems to hold '/', '?' or '#' (or an option value an '@'): {_ENCODE_HINT}"
        )
    if parts.fragment:
        raise ConfigError(
            f"{shown} has a '#' part, which nothing reads; if the '#' is in the password, " + _ENCODE_HINT
        )
    problem = _host_problem(url, shown)
    if problem:
        raise ConfigError(problem)
    if scheme in ("redis", "rediss"):
        redis_database(parts.path, shown)
    if not at:
        return parts
    _check_user_info(strict_user_info, shown)
    # Drivers split "u:p@ss@host" differently (libpq and SQLAlchemy at the first '@', Python,
    # redis-py and PyMySQL at the last); percent-encoded, every one reads the same user,
    # password and host.
    user, colon, password = strict_user_info.partition(":")
    user_info = _encoded(user) + (f":{_encoded(password)}" if colon else "")
    return parts._replace(netloc=f"{user_info}@{host}")


def url_text(parts: SplitResult) -> str:
    """The text of a split URL; unlike ``geturl`` it keeps the empty authority of
    ``sqlite:///path`` and ``memory://``."""
    text = f"{parts.scheme}://{parts.netloc}{parts.path}" if parts.scheme else parts.path
    if parts.query:
        text += f"?{parts.query}"
    if parts.fragment:
        text += f"#{parts.fragment}"
    return text


def redis_database(path: str, shown: str) -> int:
    """The database number a Redis URL's path names (``/2``; none is 0); anything else
    (``/abc``, ``/-1``, ``/1/2``) is refused, not read as database 0."""
    number = path[1:] if path.startswith("/") else path
    if not number:
        return 0
    if not (number.isascii() and number.isdigit()) or len(number) > 10 or int(number) > MAX_REDIS_DATABASE:
        raise ConfigError(
            f"Redis database {number!r} in {shown} is not a database number; write "
            f"redis://HOST:PORT/N with N from 0 to the server's 'databases' setting minus 1 "
            f"(0-15 by default), or leave it out for 0"
        )
    return int(number)


def scrubbed(message: str, url: str) -> str:
    """``message`` (a driver's error about ``url``) with the URL's secrets masked, as some
    drivers quote the password they could not use (psycopg: ``invalid percent-encoded
    token: "…"``). A secret of fewer than 4 characters is masked only as a whole word."""
    for secret in sorted(_secrets(url), key=len, reverse=True):
        if len(secret) >= 4:
            message = message.replace(secret, MASK)
        else:
            message = re.sub(rf"(?<![\w%]){re.escape(secret)}(?!\w)", MASK, message)
    return message


def _secrets(url: str) -> set[str]:
    """The password and the secret option values of ``url``, as typed and decoded."""
    found: set[str] = set()
    _head, user_info, rest = _cut(url)
    if user_info is not None and ":" in user_info:
        found.add(user_info.partition(":")[2])
    _path, question, query = rest.partition("?")
    secret_follows = False
    for option in query.split("&") if question else ():
        name, equals, value = option.partition("=")
        if equals and unquote_plus(name).lower() in SECRET_OPTIONS:
            found.add(value)
            secret_follows = True
        elif secret_follows and not equals:
            found.add(option)
        else:
            secret_follows = False
    forms = (
        form for secret in found for form in (secret, unquote(secret), unquote_plus(secret), _encoded(secret))
    )
    return {form for form in forms if form}


def _encoded(text: str) -> str:
    return quote(unquote(text), safe="")


def _cut(text: str) -> tuple[str, str | None, str]:
    """``(scheme://, user info or None, the rest)``. The user info runs to the last ``@``
    unless the text before its first ``:`` holds ``/ ? #`` (then the ``@`` is in a path or
    an option, and there is no password to find)."""
    match = _SCHEME.match(text)
    if match is None:
        return "", None, text
    head, rest = match.group(0), text[match.end() :]
    user_info, at, after = rest.rpartition("@")
    user = user_info.partition(":")[0]
    if not at or any(mark in user for mark in "/?#"):
        return head, None, rest
    if ":" not in user_info and any(mark in user_info for mark in "/?#"):
        return head, None, rest  # "host/db?opt=a@b": no password, an '@' in an option
    return head, user_info, after


def _masked_query(rest: str) -> str:
    """``rest`` (host, path, query) with secret option values masked; a piece without ``=``
    after a secret is taken to be more of it (a password holding an unescaped ``&``)."""
    path, question, query = rest.partition("?")
    if not question:
        return rest
    shown: list[str] = []
    secret_follows = False
    for option in query.split("&"):
        name, equals, _value = option.partition("=")
        if equals and unquote_plus(name).lower() in SECRET_OPTIONS:
            shown.append(f"{name}={MASK}")
            secret_follows = True
        elif secret_follows and not equals:
            shown.append(MASK)
        else:
            shown.append(option)
            secret_follows = False
    return f"{path}?{'&'.join(shown)}"


def _check_user_info(user_info: str, shown: str) -> None:
    """Refuse a user name or password that no driver reads alike: a space, a control
    character or a ``%`` that starts no escape (psycopg refuses them, others keep them)."""
    if _PERCENT.search(user_info):
        raise ConfigError(
            f"the user name or password in {shown} holds a '%' that starts no "
            "percent-escape; write a '%' as %25 (and '@' as %40, '/' as %2F, a space as %20)"
        )
    if any(character.isspace() or ord(character) < 32 or ord(character) == 127 for character in user_info):
        raise ConfigError(
            f"the user name or password in {shown} holds a space or a control character; " + _ENCODE_HINT
        )


def _host_problem(url: str, shown: str) -> str | None:
    """What is wrong with the host and port of ``url`` (None if nothing): hosts of several
    servers (``h1:27017,h2:27017`` in MongoDB) are checked one by one."""
    _head, user_info, rest = _cut(url)
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if user_info is None:
        netloc = netloc.rpartition("@")[2]
    for host in netloc.split(","):
        if host.startswith("["):
            address, closed, after = host[1:].partition("]")
            if not closed:
                return (
                    f"{shown} has an unclosed '[' in its host; write an IPv6 address in "
                    f"brackets, e.g. [::1] or [::1]:PORT"
                )
            if after and not after.startswith(":"):
                return f"{shown} has {after!r} after the IPv6 address [{address}]; write [ADDRESS]:PORT"
            port = after[1:]
        else:
            if "[" in host or "]" in host:
                return f"{shown} has a stray bracket in its host; write an IPv6 address as [::1]"
            port = host.rpartition(":")[2] if ":" in host else ""
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            return f"port {port!r} in {shown} is not a port; give a number from 1 to 65535"
    return None
