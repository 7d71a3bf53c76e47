"""neardup sweep: the grid, the ranking and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.errors import ConfigError
from neardup.eval.metrics import Gold
from neardup.eval.sweep import Grid, check_grid, format_rows, run_sweep
from tests.test_baselines import BASE, EDITED, OTHER, ZH, ZH_EDITED

TEXTS = [BASE, OTHER, EDITED, ZH, ZH_EDITED, BASE + " Copyright 1987 Reuters."]
CLUSTERS = ["a", "o", "a", "z", "z", "a"]
LEVELS = ["original", "unique", "light", "original", "light", "light"]


def test_sweep_scores_every_setting_best_first() -> None:
    gold = Gold.from_labels(CLUSTERS, LEVELS)
    grid = Grid(["tf"], ["city64"], (64,), (3, 16), ["none", "jaccard"], ("vsm",))
    rows = run_sweep(TEXTS, gold, grid)
    assert len(rows) == grid.size == 5
    f1 = [row.scores.f1 for row in rows]
    assert f1 == sorted(f1, reverse=True)
    best = rows[0]
    assert best.scores.gold_pairs == 4 and best.scores.f1 > 0.8
    narrow = next(r for r in rows if r.setting.max_distance == 3 and r.setting.verify == "none")
    assert best.scores.f1 > narrow.scores.f1
    wide = next(r for r in rows if r.setting.max_distance == 16 and r.setting.verify == "jaccard")
    assert set(wide.seconds) == {"fingerprints", "pairs", "verify"}
    assert "--verify jaccard" in wide.setting.describe()
    table = format_rows(rows, top=2, markdown=True)
    assert table.count("\n") == 3 and table.startswith("| rank |")
    data = rows[0].as_dict()
    assert {"f1", "precision", "recall", "seconds", "options", "adjusted_rand_index"} <= set(data)


def test_sweep_leaves_out_distances_a_width_cannot_search() -> None:
    gold = Gold.from_labels(CLUSTERS, LEVELS)
    rows = run_sweep(TEXTS, gold, Grid(["tf"], ["city64"], (32,), (3, 40), ["none"]))
    assert [row.setting.max_distance for row in rows] == [3]


def test_unknown_baseline_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown baseline"):
        check_grid(Grid(baselines=("nope",)))


def test_sweep_command(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    rows = [
        {"id": f"d{i}", "text": t, "cluster": c, "level": lv}
        for i, (t, c, lv) in enumerate(zip(TEXTS, CLUSTERS, LEVELS, strict=True))
    ]
    source.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    args = ["sweep", str(source), str(source), "--weighting", "tf", "--hash", "city64", "-k", "3,16"]
    result = CliRunner().invoke(main, [*args, "--verify", "none,jaccard", "--output-format", "json"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert len(lines) == 4 and lines[0]["f1"] >= lines[-1]["f1"]
    table = CliRunner().invoke(main, [*args, "--top", "1"])
    assert table.exit_code == 0 and len(table.output.splitlines()) == 2
    bad = CliRunner().invoke(main, [*args, "--verify", "maybe"])
    assert bad.exit_code == 2 and "choose from" in bad.output
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "x", "text": "t"}) + "\n")
    mismatch = CliRunner().invoke(main, ["sweep", str(source), str(other)])
    assert mismatch.exit_code == 1 and "not in the gold file" in mismatch.output
