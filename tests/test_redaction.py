"""One URL redaction for every layer: a password typed into a store URL never reaches a
message, a log line, ``repr`` or an answer (the index layer's use of it: test_index_safety)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from click.testing import CliRunner

from neardup import ConfigError, FingerprintConfig, NeardupError, SimhashIndex
from neardup.cli.main import main
from neardup.dedup.documents import DocumentIndex, text_index_config
from neardup.storage.urls import parse_store_url, redacted, scrubbed, url_text

from .conftest import write_lines


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://admin:s3cret@db.example:5432/crm", "postgresql://admin:***@db.example:5432/crm"),
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("mysql://u:p%40ss@h/db?table=nd", "mysql://u:***@h/db?table=nd"),
        ("mongodb://u:pw@[::1]:27017/db", "mongodb://u:***@[::1]:27017/db"),
        ("redis://h/0?password=s3cret&prefix=x", "redis://h/0?password=***&prefix=x"),
        ("postgresql://h/db?sslpassword=s3cret", "postgresql://h/db?sslpassword=***"),
        ("postgresql://user@h/db", "postgresql://user@h/db"),
        ("sqlite:///tmp/index.db", "sqlite:///tmp/index.db"),
        ("memory://", "memory://"),
    ],
)
def test_passwords_are_masked_and_the_rest_kept(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_a_password_with_an_at_sign_is_masked_whole() -> None:
    shown = redacted("postgresql://admin:p@ss@host/db")
    assert "p@ss" not in shown and "ss@host" not in shown and shown.endswith("@host/db")


# -- the secret never shows, wherever the URL goes -------------------------------------------------
SECRET = "s3cretPW"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://admin:{SECRET}@db.example:5432/crm",
        f"postgres://admin:{SECRET}@db.example/crm?table=nd_docs",
        f"mysql://root:{SECRET}@127.0.0.1:3306/neardup",
        f"mariadb://root:{SECRET}@127.0.0.1/neardup",
        f"redis://:{SECRET}@127.0.0.1:6379/0",
        f"rediss://user:{SECRET}@cache.example:6380/2?prefix=nd",
        f"mongodb://u:{SECRET}@127.0.0.1:27017/neardup",
        f"mongodb+srv://u:{SECRET}@cluster.example/neardup",
        f"memory://admin:{SECRET}@host/",
        f"redis://127.0.0.1/0?password={SECRET}",
        f"redis://127.0.0.1/0?prefix=x&PASSWORD={SECRET}&db=1",
        f"postgresql://h/db?sslpassword={SECRET}",
        f"postgresql://h/db?user=u&pwd={SECRET}",
        f"mongodb://h/db?authMechanismProperties=AWS_SESSION_TOKEN:{SECRET}",
        f"mysql://u:p%40{SECRET}@h/db",  # percent-encoded "@" inside the password
        f"mysql://u:{SECRET}:{SECRET}@h/db",  # a ":" inside the password
        f"postgresql://u:{SECRET}@{SECRET}@h/db",  # an unencoded "@" inside the password
    ],
)
def test_no_form_of_password_survives_redaction(url: str) -> None:
    shown = redacted(url)
    assert SECRET not in shown, shown
    assert "***" in shown
    assert redacted(urlsplit(url)) == shown  # a SplitResult is redacted alike
    assert redacted(shown) == shown  # idempotent: a shown URL shows as itself


@pytest.mark.parametrize(
    "url", ["postgresql://h/db", "redis://127.0.0.1:6379/0?prefix=x", "sqlite:///tmp/index.db", "memory://"]
)
def test_a_url_without_a_password_is_shown_unchanged(url: str) -> None:
    assert redacted(url) == url


def _open_error(url: str) -> str:
    with pytest.raises(NeardupError) as raised:
        SimhashIndex.open(url).close()
    return f"{raised.value}\n{raised.value!r}"


@pytest.mark.parametrize(
    "url",
    [
        f"memory://admin:{SECRET}@host/?bogus=1",  # unknown option
        f"redis://:{SECRET}@127.0.0.1:1/0?bogus=1",
        f"redis://127.0.0.1:1/0?password={SECRET}",  # a password option the backend does not take
        f"nope://admin:{SECRET}@host/",  # unknown scheme
        f"sqlite://admin:{SECRET}@/tmp/index.db",  # an SQLite URL with a host
        f"sqlite:///tmp/index.db?layout=heap&password={SECRET}",  # a bad option value
        f"mysql://u:{SECRET}@127.0.0.1:1/",  # names no database
    ],
)
def test_store_url_errors_never_show_the_password(url: str) -> None:
    message = _open_error(url)
    assert SECRET not in message, message


#: The client library each scheme's store needs (no server: nothing listens on port 1).
DRIVERS = {"redis": "redis", "postgresql": "psycopg", "mysql": "pymysql", "mongodb": "pymongo"}


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:1/0",
        f"postgresql://u:{SECRET}@127.0.0.1:1/db",
        f"mysql://u:{SECRET}@127.0.0.1:1/db",
        f"mongodb://u:{SECRET}@127.0.0.1:1/db?serverSelectionTimeoutMS=300",
    ],
)
def test_connection_errors_never_show_the_password(url: str) -> None:
    """Nothing listens on 127.0.0.1:1: each driver's own connection error is wrapped, and the
    message may not carry the password."""
    pytest.importorskip(DRIVERS[urlsplit(url).scheme])
    with pytest.raises(NeardupError) as raised:
        SimhashIndex.open(url).close()
    assert SECRET not in str(raised.value), raised.value
    assert "***" in str(raised.value)


def test_repr_and_describe_of_an_index_never_show_the_password() -> None:
    url = f"memory://admin:{SECRET}@host/"
    with SimhashIndex.open(url, text_index_config(FingerprintConfig())) as index:
        assert SECRET not in repr(index) and "admin:***@host" in repr(index)
        assert SECRET not in str(index)
        described = DocumentIndex(index).describe()
        assert described["url"] == "memory://admin:***@host/"
        assert SECRET not in repr(described)
        assert index.url == url  # the index keeps the real URL, to reopen it


def test_cli_index_errors_never_show_the_password() -> None:
    for extra in ((), ("--json",)):
        result = CliRunner().invoke(main, ["index", "stats", f"memory://admin:{SECRET}@host/", *extra])
        assert result.exit_code == 1
        assert SECRET not in result.stdout + result.stderr and "admin:***@host" in result.stderr


def test_dedup_with_an_index_never_shows_the_password(tmp_path: Path) -> None:
    source = write_lines(
        tmp_path / "in.jsonl",
        {"id": "a", "text": "hello world, the quick brown fox jumps over the lazy dog"},
        {"id": "b", "text": "hello world, the quick brown fox jumps over the lazy dog!"},
    )
    clusters = tmp_path / "clusters.jsonl"
    args = ["dedup", str(source), "--index", f"memory://admin:{SECRET}@host/", "--clusters", str(clusters)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr, result.stderr


def test_an_index_without_text_settings_never_shows_the_password() -> None:
    with SimhashIndex.open(f"memory://admin:{SECRET}@host/") as index, pytest.raises(NeardupError) as raised:
        DocumentIndex(index).fingerprinter  # noqa: B018 - texts need the settings it lacks
    assert SECRET not in str(raised.value), raised.value


# -- malformed URLs: masked however they are cut, refused with the fix -----------------------------
#: Passwords a user may type unescaped; each piece of them must stay hidden.
MALFORMED = [
    f"postgresql://u:p@ss/w?rd#{SECRET}@host/db",
    f"postgresql://u:{SECRET}/x@127.0.0.1:1/db",
    f"mysql://u:a?{SECRET}@127.0.0.1:1/db",
    f"mongodb://u:{SECRET}/w@127.0.0.1:1/db",
    f"mongodb://u:x#{SECRET}@127.0.0.1:1/db",
    f"redis://:{SECRET} with spaces@127.0.0.1:1/0",
    f"redis://u:12?{SECRET}@host/0",
    f"postgresql://u:p%zz{SECRET}@127.0.0.1:1/db",  # psycopg quotes a bad percent-escape
    f"postgresql://u:{SECRET} x@127.0.0.1:1/db",  # psycopg quotes a password with a space
]


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_password_is_masked_whole(url: str) -> None:
    shown = redacted(url)
    assert SECRET not in shown and "***" in shown, shown
    assert redacted(urlsplit(url)) == shown
    assert redacted(shown) == shown


def test_every_piece_of_an_unescaped_password_is_masked() -> None:
    shown = redacted("postgresql://u:p@ss/w?rd#x@host/db")
    assert shown == "postgresql://u:***@host/db"
    for piece in ("ss", "/w", "rd", "#x"):
        assert piece not in shown


@pytest.mark.parametrize("url", ["redis://[::1", "postgresql://u:pw@[::1/db", "mongodb://[::1:27017/db"])
def test_redaction_never_raises(url: str) -> None:
    assert redacted(url).startswith(url.split("//")[0])


def test_a_percent_encoded_option_name_is_masked_too() -> None:
    assert SECRET not in redacted(f"redis://h/0?pass%77ord={SECRET}")


def test_a_message_quoting_a_url_is_redacted() -> None:
    shown = redacted(f'connection to "postgresql://u:{SECRET}@h/db" failed')
    assert SECRET not in shown and "u:***@h/db" in shown


def test_driver_messages_are_scrubbed_of_the_password() -> None:
    url = f"postgresql://u:p%40{SECRET}@h/db"
    message = f'invalid token "p%40{SECRET}", or "p@{SECRET}"'
    assert SECRET not in scrubbed(message, url)
    assert scrubbed("a b ab", "redis://:ab@h/0") == "a b ***"  # a short one only as a word


@pytest.mark.parametrize("url", MALFORMED)
def test_opening_a_malformed_url_never_shows_the_password(url: str) -> None:
    pytest.importorskip(DRIVERS[urlsplit(url).scheme])
    message = _open_error(url)
    assert SECRET not in message, message
    assert message.count("\n") == 1, message  # one line each for str and repr


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis://[::1", "unclosed '['"),
        ("redis://[::1/0", "unclosed '['"),
        ("postgresql://u:pw@[::1/db", "unclosed '['"),
        ("mysql://u:pw@[::1/db", "unclosed '['"),
        ("mariadb://[::1:3306/db", "unclosed '['"),
        ("mongodb://[::1/db", "unclosed '['"),
        ("mongodb://h1:27017,[::1/db", "unclosed '['"),
        ("redis://[::1]x/0", "after the IPv6 address"),
        ("redis://h]/0", "stray bracket"),
        ("mysql://u:pw@127.0.0.1:99999/db", "port '99999'"),
        ("mariadb://127.0.0.1:0/db", "port '0'"),
        ("mongodb://127.0.0.1:99999/db", "port '99999'"),
        ("mongodb://h1:27017,h2:99999/db", "port '99999'"),
        ("postgresql://127.0.0.1:-1/db", "port '-1'"),
        ("redis://127.0.0.1:６３７９/0", "port '６３７９'"),
        ("mongodb://u:p/w@127.0.0.1:1/db", "percent-encode"),
        ("postgresql://u:p@ss/w?rd#x@host/db", "percent-encode"),
        ("redis://u:pw@h/0#frag", "'#' part"),
        ("postgresql://u:p%zz@h/db", "%25"),
        ("mysql://u:p w@h/db", "space"),
        ("redis://127.0.0.1/abc", "Redis database 'abc'"),
        ("redis://127.0.0.1/-1", "Redis database '-1'"),
        ("rediss://127.0.0.1/1/2", "Redis database '1/2'"),
        ("redis://127.0.0.1/99999999999", "Redis database '99999999999'"),
        ("postgresql:/u:pw@h/db", "lacks the '//'"),
    ],
)
def test_a_bad_store_url_is_one_config_error_naming_the_fix(url: str, said: str) -> None:
    """Every backend's URL goes through one parser: no driver's ValueError or traceback,
    no silent database 0, and the message names the fault and the fix."""
    with pytest.raises(ConfigError) as raised:
        SimhashIndex.open(url).close()
    message = str(raised.value)
    assert said in message and "\n" not in message, message
    assert "pw" not in message


@pytest.mark.parametrize(
    "url",
    ["redis://[::1", "mysql://u:pw@127.0.0.1:99999/db", "mongodb://u:p/w@127.0.0.1:1/db", "redis://h/abc"],
)
def test_the_command_line_shows_a_bad_store_url_as_one_line(url: str) -> None:
    result = CliRunner().invoke(main, ["index", "stats", url])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("neardup: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert isinstance(result.exception, SystemExit), result.exception


@pytest.mark.parametrize(
    ("typed", "user", "password", "host"),
    [
        ("postgresql://u:p@ss@h:5432/db", "u", "p@ss", "h"),  # libpq would take host "ss@h"
        ("mysql://u:p%40ss@h/db", "u", "p@ss", "h"),
        ("mongodb://me@corp:a:b@h/db", "me@corp", "a:b", "h"),  # pymongo refuses a raw ':'
        ("redis://:pw@[::1]:6379/0", "", "pw", "::1"),
    ],
)
def test_every_driver_gets_the_user_and_password_percent_encoded(
    typed: str, user: str, password: str, host: str
) -> None:
    parts = parse_store_url(typed)
    assert parts.netloc.count("@") == 1
    assert unquote(parts.username or "") == user and unquote(parts.password or "") == password
    assert parts.hostname == host


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0?prefix=x",
        "redis://127.0.0.1/",
        "redis://127.0.0.1",
        "rediss://u:pw@h:6380/15",
        "postgresql://h/db?table=nd",
        "postgresql:///db",
        "mongodb://h1:27017,h2:27018/db?replicaSet=rs",
        "mongodb+srv://u:pw@cluster.example/db",
        "mysql://u@[::1]:3306/db",
        "sqlite:///tmp/a@b?.db",
        "memory://",
    ],
)
def test_good_store_urls_parse_unchanged(url: str) -> None:
    assert url_text(parse_store_url(url)) == url


def test_the_start_up_line_and_stats_mask_a_malformed_password() -> None:
    """``serve``'s start-up line, ``/v1/stats`` (``describe``) and ``repr`` of an index opened
    with a password holding unescaped '@' and a space."""
    from neardup.cli.serve import _described

    url = f"memory://admin:p@ss {SECRET}/x@host/"  # memory:// ignores its host: it opens
    with SimhashIndex.open(url, text_index_config(FingerprintConfig())) as index:
        shown = [repr(index), _described(index), DocumentIndex(index).describe()["url"]]
    for text in shown:
        assert SECRET not in text and "ss" not in text.split("admin:")[1].split("@host")[0], text
        assert "admin:***@host/" in text
