"""The code one ``POST /v1/check`` into SQLite runs through: the neardup modules (and their
functions) entered while the service answers one document, after a warm-up request.

Counted with a profile hook installed in every thread before the app starts (the store
worker thread included), recording each Python function call whose code lives under
src/neardup; module-level code and imports (done by the warm-up) are not counted. The
service runs in-process (fastapi's TestClient), with the default index ``neardup serve``
creates on a new SQLite file. The document is new (no stored candidate); with
``--near-duplicate`` it is a near-duplicate of a stored one, so the candidate's sketch check
(and near the threshold the exact shingle Jaccard) and the cluster choice run too (the same
modules, more functions). A module counts once one of its functions runs; constants and types
it only defines (read at import) do not. docs/layout.md lists the modules and why each is one.

    python3 benchmarks/check_path.py [--near-duplicate]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import neardup

SOURCE = str(Path(neardup.__file__).resolve().parent)
RECORDING = [False]
CALLS: set[tuple[str, str]] = set()


def profile(frame: FrameType, event: str, _: Any) -> None:
    if RECORDING[0] and event == "call" and frame.f_code.co_filename.startswith(SOURCE):
        CALLS.add((frame.f_code.co_filename[len(SOURCE) + 1 :], frame.f_code.co_qualname))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--near-duplicate",
        action="store_true",
        help="post a near-duplicate of a stored text (its candidate is checked) instead of a new text",
    )
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from neardup import Index
    from neardup.service import ServiceSettings, create_app

    sys.setprofile(profile)
    threading.setprofile(profile)
    with tempfile.TemporaryDirectory() as folder, Index.open(os.path.join(folder, "check.db")) as index:
        client = TestClient(create_app(index, ServiceSettings()))
        text = "The quick brown fox jumps over the lazy dog near the river bank today."
        warm = [{"id": f"w{n}", "text": f"a warm-up text, number {n}, with a few words"} for n in range(3)]
        if args.near_duplicate:
            warm.append({"id": "a0", "text": text.replace("today", "this morning")})
            warm.append({"id": "w3", "text": warm[-1]["text"] + " Again."})  # the check's code, warmed
        client.post("/v1/check", json={"documents": warm})
        RECORDING[0] = True
        answer = client.post("/v1/check", json={"documents": [{"id": "a1", "text": text}]})
        RECORDING[0] = False
        client.close()
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    assert answer.status_code == 200, answer.text
    assert answer.json()["results"][0]["duplicate"] == args.near_duplicate, answer.text
    modules = sorted({module for module, _ in CALLS})
    print(f"POST /v1/check into SQLite: {len(modules)} neardup modules, {len(CALLS)} functions")
    if os.environ.get("CHECK_PATH_FUNCTIONS"):
        for module, name in sorted(CALLS):
            print(f"    {module} {name}")
    for module in modules:
        print(f"  {module:40} {sum(1 for name, _ in CALLS if name == module):4} functions")


if __name__ == "__main__":
    main()
