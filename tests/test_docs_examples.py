"""The ```python blocks of the docs pages about the persistent index and the service run as
written, with README.md's rules (tests/test_readme.py): each page's blocks in order in one
namespace, in a temporary folder, and a line's ``# VALUE`` claim must hold. The service
example's ``uvicorn.run`` is replaced by a client that starts the app and asks /healthz, so
the example is run, not served."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPOSITORY
from .test_readme import python_blocks, run_block

PAGES = ["docs/storage.md", "docs/service.md"]


def _blocks(page: str) -> list[Any]:
    return python_blocks((REPOSITORY / page).read_text(encoding="utf-8"))


def test_the_pages_have_python_blocks() -> None:
    assert all(_blocks(page) for page in PAGES)


TOKEN = "0123456789abcdef"


class _Served:
    """What the fake ``uvicorn.run`` saw: /healthz's status and a /v1/check's answer."""

    status: int | None = None
    checked: dict[str, Any] | None = None


def _fake_uvicorn() -> types.ModuleType:
    from fastapi.testclient import TestClient

    module = types.ModuleType("uvicorn")

    def run(app: Any, **_: Any) -> None:
        with TestClient(app) as client:
            _Served.status = client.get("/healthz").status_code
            headers = {"Authorization": f"Bearer {TOKEN}"}
            body = {"id": "x", "text": "A short note about the weather in the hills."}
            _Served.checked = client.post("/v1/check", json=body, headers=headers).json()

    module.run = run  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_of_a_page_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "token").write_text(TOKEN + "\n")
    monkeypatch.setitem(sys.modules, "uvicorn", _fake_uvicorn())
    _Served.status = _Served.checked = None
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    wrong = []
    for block in _blocks(page):
        if "uvicorn" in block.code:
            pytest.importorskip("fastapi")
        wrong += [message.replace("README.md", page) for message in run_block(block, namespace)]
    assert not wrong, "\n".join(wrong)
    if page == "docs/service.md":
        # A new store: Index.open created the index `neardup serve` creates, which takes texts.
        assert _Served.status == 200
        assert _Served.checked is not None and _Served.checked["cluster"] == "x", _Served.checked
