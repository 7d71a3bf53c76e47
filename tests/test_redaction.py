"""One URL redaction for every layer: a password typed into a store URL never reaches a
message, a log line, ``repr`` or an answer (the index layer's use of it: test_index_safety)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from neardup import FingerprintConfig, NeardupError, SimhashIndex
from neardup.cli.main import main
from neardup.dedup.documents import DocumentIndex
from neardup.dedup.incremental import text_index_config
from neardup.storage.urls import redacted

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
        DocumentIndex(index)
    assert SECRET not in str(raised.value), raised.value
