"""One URL redaction for every layer: a password typed into a store URL never reaches a
message, a log line, ``repr`` or an answer (the index layer's use of it: test_index_safety)."""

from __future__ import annotations

import pytest

from neardup.storage.urls import redacted


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
