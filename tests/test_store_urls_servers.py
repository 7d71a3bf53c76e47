"""Store URLs against real servers: a password holding an unescaped '@' or a percent-encoded
'/' reaches the server as typed, through every driver the same way (the test PostgreSQL
trusts 127.0.0.1, so any password is taken; what matters is that host and user are right)."""

from __future__ import annotations

import pytest

from neardup.records.sources import open_source
from neardup.storage import open_storage


@pytest.mark.parametrize("password", ["p@ss@rd", "p%2Fw%3Frd%23x", "p@ss%20word"])
def test_postgres_reads_the_host_after_the_last_at(fresh_postgres_url: str, password: str) -> None:
    """libpq ends the password at the first '@' (host "ss@rd@127.0.0.1"); neardup hands it
    the password percent-encoded, so the store opens."""
    url = fresh_postgres_url.replace("postgres@", f"postgres:{password}@", 1)
    open_storage(url).close()


def test_records_reads_the_host_after_the_last_at(fresh_postgres_url: str) -> None:
    """SQLAlchemy also ends the password at the first '@'."""
    pytest.importorskip("sqlalchemy")
    url = fresh_postgres_url.replace("postgres@", "postgres:p@ss@rd@", 1)
    with open_source(url, query="SELECT 1 AS id") as source:
        assert [chunk.count for chunk in source.chunks()] == [1]
