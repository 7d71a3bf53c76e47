"""neardup report: a self-contained HTML file whose plots render in headless Chromium.

Needs Debian's chromium (`apt-get install -y chromium`) and matplotlib (the eval extra); skips
with the reason when either is missing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.eval import measures
from tests.test_eval_sweep import CLUSTERS, LEVELS, TEXTS

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]
INSTALL = "apt-get update && apt-get install -y chromium"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip(f"headless Chromium is not installed; install it with: {INSTALL}")
    return found


@pytest.fixture(scope="module")
def report_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("matplotlib", reason="neardup report needs matplotlib (pip install 'neardup[eval]')")
    folder = tmp_path_factory.mktemp("report")
    source = folder / "docs.jsonl"
    rows = [
        {"id": f"d{i}", "text": text, "title": "", "cluster": cluster, "level": level}
        for i, (text, cluster, level) in enumerate(zip(TEXTS * 3, CLUSTERS * 3, LEVELS * 3, strict=True))
    ]
    for copy, row in enumerate(rows):
        row["cluster"] = f"{row['cluster']}{copy // len(TEXTS)}"
    source.write_text("\n".join(json.dumps(row, ensure_ascii=False) for row in rows) + "\n", encoding="utf-8")
    output = folder / "report.html"
    args = ["report", str(source), str(source), "-o", str(output), "--weighting", "tf,tfidf-len", "-k", "8"]
    result = CliRunner().invoke(main, [*args, "--sizes", "300,600", "--skew-size", "3000"])
    assert result.exit_code == 0, result.output
    return output


def test_report_is_self_contained(report_file: Path) -> None:
    page = report_file.read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 5
    assert not re.search(r'(src|href)="(?!data:)', page), "every resource must be inline"


def test_plots_render_in_headless_chromium(report_file: Path, tmp_path: Path) -> None:
    browser = chromium()
    url = report_file.resolve().as_uri()
    dom = subprocess.run(
        [
            browser,
            *CHROMIUM_FLAGS,
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom.stdout)
    assert body is not None
    assert 'data-rendered="5"' in body.group(0) and 'data-images="5"' in body.group(0), body.group(0)
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    shot = tmp_path / "shot.png"
    subprocess.run(
        [browser, *CHROMIUM_FLAGS, "--window-size=1100,2400", f"--screenshot={shot}", url],
        capture_output=True,
        timeout=120,
        check=True,
    )
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))[..., :3]
    assert pixels.shape[0] >= 2000
    not_white = np.mean(pixels.min(axis=2) < 0.9)
    assert not_white > 0.05, f"screenshot is nearly blank ({not_white:.1%} non-white pixels)"
    colours = len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    assert colours > 50, "plots draw in colour; a blank or text-only page has few colours"


def test_measures_are_plain_data() -> None:
    times = measures.scaling_times([200, 400])
    assert set(times) == {"n", "index", "single_pass"} and np.all(times["index"] > 0)
    hashes = measures.hash_measures(["a", "bb", "ccc"] * 10, ["city64", "java"])
    assert set(hashes) == {"city64", "java"} and hashes["city64"][1].shape == (64,)
    buckets = measures.bucket_measures(2000, 0.3)
    runs = buckets["runs"]
    assert isinstance(runs, dict) and runs["with"][2] == runs["without"][2]
