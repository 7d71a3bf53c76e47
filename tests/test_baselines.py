"""Baselines: each method on small hand-made cases, and the `neardup baseline` contracts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from neardup.cli.main import main
from neardup.errors import ConfigError
from neardup.eval.baselines import BASELINES, run_baseline
from neardup.eval.baselines.methods import word_shingles
from tests.conftest import read_jsonl, write_lines

BASE = (
    "The central bank raised its benchmark interest rate by a quarter point on Tuesday, citing "
    "persistent inflation in housing and services, and signalled that further increases were possible."
)
EDITED = BASE.replace("Tuesday", "Wednesday") + " Reporting by Jane Doe."
OTHER = (
    "Heavy rain flooded the northern valley overnight, closing schools and roads while volunteers "
    "filled sandbags along the swollen river banks near the old mill."
)
ZH = "中央关于一九九八年工作的指导方针中突出强调要精心部署，这应该引起我们高度重视，各地要认真贯彻落实。"
ZH_EDITED = ZH + "（来源：人民日报）"
TEXTS = [BASE, OTHER, EDITED, BASE, ZH, ZH_EDITED]


def pairs_of(name: str, texts: list[str], parameter: float | None = None) -> set[tuple[int, int]]:
    result = run_baseline(name, texts, parameter)
    assert np.all(result.i < result.j)
    return set(zip(result.i.tolist(), result.j.tolist(), strict=True))


@pytest.mark.parametrize("name", ["classic", "shingle", "vsm", "imatch"])
def test_identical_texts_pair_and_unrelated_do_not(name: str) -> None:
    # I-Match keeps words in at most max_df of the documents: half of these six.
    found = pairs_of(name, TEXTS, 0.5 if name == "imatch" else None)
    assert (0, 3) in found
    assert not any(1 in pair for pair in found)


@pytest.mark.parametrize("name", ["shingle", "vsm"])
def test_set_methods_find_light_edits(name: str) -> None:
    found = pairs_of(name, TEXTS)
    assert {(0, 2), (2, 3), (4, 5)} <= found


def test_distances_are_hamming_or_one_minus_similarity() -> None:
    classic = run_baseline("classic", TEXTS)
    assert classic.distance[classic.j == 3][0] == 0.0
    vsm = run_baseline("vsm", TEXTS)
    assert np.all((vsm.distance >= -1e-9) & (vsm.distance <= 0.2 + 1e-9))


def test_imatch_ignores_order_and_repeats_but_not_new_rare_words() -> None:
    texts = [
        "alpha beta gamma delta",
        "delta gamma beta alpha alpha",
        "alpha beta gamma delta epsilon",
        *[f"filler{i} common" for i in range(20)],
    ]
    found = pairs_of("imatch", texts, 0.2)
    assert (0, 1) in found
    assert (0, 2) not in found and (1, 2) not in found
    # "common" is in 20 of 23 documents: filtered out, so the fillers' digests differ.
    assert not any(pair[0] >= 3 for pair in found)


def test_shingle_threshold_and_sampling() -> None:
    assert pairs_of("shingle", [BASE, BASE + " " + OTHER], 0.9) == set()
    assert (0, 1) in pairs_of("shingle", [BASE, BASE], 1.0)


def test_word_shingles_short_documents_and_stability() -> None:
    rows, hashes = word_shingles([["a", "b"], ["a", "b", "c", "d", "e"], ["x", "a", "b", "c", "d"]], 4)
    assert rows.tolist() == [0, 1, 1, 2, 2]
    # "a b c d" appears in documents 1 and 2 at different offsets: same hash.
    assert hashes[1] == hashes[4]
    assert len(set(hashes.tolist())) == 4


def test_classic_uses_four_16_bit_tables_exactly() -> None:
    """Whatever the block layout, the search is exact: equal to brute force on the fingerprints."""
    from neardup import Fingerprinter
    from neardup.dedup.batch import brute_force_pairs

    fingerprints = Fingerprinter(weighting="tf", hash="java", idf="none").fingerprint_many(TEXTS)
    expected = brute_force_pairs(fingerprints, 3)
    assert pairs_of("classic", TEXTS) == set(zip(expected.i.tolist(), expected.j.tolist(), strict=True))


def test_peers() -> None:
    pytest.importorskip("simhash", reason="the pypi-simhash baseline needs the simhash package (eval extra)")
    assert (0, 3) in pairs_of("pypi-simhash", TEXTS)
    pytest.importorskip("datasketch", reason="the minhash-lsh baseline needs datasketch (eval extra)")
    found = pairs_of("minhash-lsh", TEXTS)
    assert (0, 3) in found and (4, 5) in found
    assert not any(1 in pair for pair in found)


def test_unknown_baseline() -> None:
    with pytest.raises(ConfigError, match="unknown baseline 'nope'"):
        run_baseline("nope", TEXTS)
    assert set(BASELINES) == {"classic", "shingle", "imatch", "vsm", "pypi-simhash", "minhash-lsh"}


def test_baseline_command_writes_dedup_contracts(tmp_path: Path) -> None:
    source = write_lines(
        tmp_path / "docs.jsonl",
        *[
            {"id": f"d{i}", "text": text, "cluster": "c" if i in (0, 2, 3) else f"d{i}"}
            for i, text in enumerate(TEXTS)
        ],
    )
    pairs, clusters = tmp_path / "pairs.jsonl", tmp_path / "clusters.jsonl"
    result = CliRunner().invoke(
        main, ["baseline", "vsm", str(source), "--pairs", str(pairs), "--clusters", str(clusters)]
    )
    assert result.exit_code == 0, result.output
    rows = read_jsonl(pairs)
    assert {"a", "b", "distance", "similarity"} <= set(rows[0])
    assert {(row["a"], row["b"]) for row in rows} >= {("d0", "d2"), ("d0", "d3"), ("d4", "d5")}
    assert [row["id"] for row in read_jsonl(clusters)] == [f"d{i}" for i in range(6)]
    assert read_jsonl(clusters)[3]["cluster"] == "d0"
    scored = CliRunner().invoke(main, ["eval", str(source), str(clusters), "--format", "json"])
    assert json.loads(scored.output)["recall"] == 1.0
    classic = CliRunner().invoke(main, ["baseline", "classic", str(source), "--pairs", str(pairs)])
    assert classic.exit_code == 0
    assert all(isinstance(row["distance"], int) for row in read_jsonl(pairs))
    missing = CliRunner().invoke(main, ["baseline", "classic", str(source)])
    assert missing.exit_code == 2 and "nothing to write" in missing.output
