"""The candidate search of neardup.dedup.candidates against brute force: the exact shingle
Jaccard of every pair of small corpora (built here, and samples of the dev sets)."""

from __future__ import annotations

import random
import string

import numpy as np
import pytest

from neardup.dedup import check_bins, shingle_sets
from neardup.dedup.candidates import (
    CandidateSearch,
    CandidateSettings,
    bands_for,
    candidate_pairs,
    collision_probability,
)
from neardup.dedup.clusters import components
from neardup.dedup.prefix_search import positions_fit, prefix_pairs
from neardup.dedup.shingle_sets import ShingleSets
from neardup.errors import ConfigError, InputError
from neardup.similarity import shingles as shingler
from neardup.similarity.shingles import HAN_SHINGLE, LATIN_SHINGLE, shingles_of
from neardup.similarity.sketches import band_columns
from neardup.similarity.verify import Shingles
from neardup.text.normalize import Normalizer
from neardup.text.tokenize import CharNgramTokenizer, contains_han

from .conftest import read_jsonl, shared_file


def brute_force(shingles: Shingles) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, jaccard) of every pair i < j of non-empty sets, exactly."""
    matrix, sizes = shingles.matrix(), shingles.sizes
    common = (matrix @ matrix.T).toarray()  # exact shared-shingle counts of all pairs
    i, j = np.triu_indices(shingles.count, 1)
    both = (sizes[i] > 0) & (sizes[j] > 0)
    i, j = i[both], j[both]
    shared = common[i, j]
    return i, j, shared / (sizes[i] + sizes[j] - shared)


def found_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return set(map(tuple, pairs.tolist()))


def edited_corpus(seed: int, originals: int = 60, words: int = 120) -> list[str]:
    """Random-word documents and copies with 2-60 % of their words replaced: many pairs spread
    over Jaccard 0.2-1, plus unrelated documents."""
    rng = random.Random(seed)
    vocabulary = [f"w{k}x" for k in range(3000)]
    texts: list[str] = []
    for _ in range(originals):
        original = [rng.choice(vocabulary) for _ in range(rng.randint(words // 2, 2 * words))]
        texts.append(" ".join(original))
        for _ in range(rng.randint(1, 4)):
            rate = rng.uniform(0.02, 0.6)
            copy = [rng.choice(vocabulary) if rng.random() < rate else word for word in original]
            texts.append(" ".join(copy))
    rng.shuffle(texts)
    return texts


def check_promise(texts: list[str], settings: CandidateSettings) -> tuple[int, float, int]:
    """Assert the structural guarantees; return (missed pairs >= threshold, their expected
    number under the binomial tail of ``hits`` band keys, pairs >= threshold)."""
    shingles = Shingles.of(texts)
    pairs = candidate_pairs(shingles, settings)
    assert pairs.dtype == np.int64 and pairs.ndim == 2 and pairs.shape[1] == 2
    assert np.all(pairs[:, 0] < pairs[:, 1])
    assert len(found_set(pairs)) == len(pairs), "a candidate pair was emitted twice"
    i, j, jaccard = brute_force(shingles)
    promised = jaccard >= settings.threshold - 1e-12
    found = found_set(pairs)
    hit = np.array([(a, b) in found for a, b in zip(i.tolist(), j.tolist(), strict=True)], dtype=bool)
    missed = promised & ~hit
    expected = sum(
        1 - collision_probability(s, settings.rows, settings.band_count, settings.hits)
        for s in jaccard[promised].tolist()
    )
    return int(missed.sum()), expected, int(promised.sum())


def test_bands_meet_the_promised_recall_and_no_fewer_would() -> None:
    for threshold, rows, hits in (
        (0.5, 5, 1),
        (0.5, 4, 1),
        (0.8, 6, 1),
        (0.3, 3, 1),
        (0.5, 5, 2),
        (0.3, 3, 3),
    ):
        bands = bands_for(threshold, rows, 0.99, hits)
        assert collision_probability(threshold, rows, bands, hits) >= 0.99
        assert bands == hits or collision_probability(threshold, rows, bands - 1, hits) < 0.99
    assert bands_for(0.5, 5, 0.99) == 146
    assert CandidateSettings().band_count == 235 and CandidateSettings().bins == 1175


def test_the_bands_past_the_text_sketch_regroup_its_bins() -> None:
    """235 bands of 5: the text sketch's 730 bins in order, then 89 bands of its bins taken
    from 5 different first bands each, so no two bands share more than one bin; bands past
    two groupings read an extension sketch."""
    columns = band_columns(5, 235)
    assert columns[:730].tolist() == list(range(730)) and int(columns.max()) == 729
    bands = columns.reshape(-1, 5)
    assert all(len(set((band // 5).tolist())) == 5 for band in bands[146:])
    counts = np.bincount(columns)
    assert counts.max() == 2 and len(set(columns[730:].tolist())) == 445
    others = [len(set(a.tolist()) & set(b.tolist())) for k, a in enumerate(bands) for b in bands[k + 1 :]]
    assert max(others) == 1
    assert int(band_columns(5, 300).max()) == 730 + 8 * 5 - 1


def test_two_hits_are_the_binomial_tail() -> None:
    """P[at least 2 of b bands] against a simulation of the bands."""
    rng = np.random.default_rng(3)
    agree = rng.random((20_000, 210)) < 0.5**5
    simulated = float((agree.sum(axis=1) >= 2).mean())
    assert abs(simulated - collision_probability(0.5, 5, 210, 2)) < 0.005
    assert collision_probability(0.5, 5, 210, 1) == 1 - (1 - 0.5**5) ** 210


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_oph_finds_every_pair_above_the_sure_margin_and_misses_no_more_than_expected(seed: int) -> None:
    settings = CandidateSettings(seed=seed)
    texts = edited_corpus(seed)
    shingles = Shingles.of(texts)
    pairs = found_set(candidate_pairs(shingles, settings))
    i, j, jaccard = brute_force(shingles)
    # At Jaccard 0.7 a pair shares fewer than 2 of 235 band keys with probability < 1e-9.
    assert 1 - collision_probability(0.7, settings.rows, settings.band_count, settings.hits) < 1e-9
    sure = [(a, b) for a, b, s in zip(i.tolist(), j.tolist(), jaccard.tolist(), strict=True) if s >= 0.7]
    assert len(sure) > 25
    assert [pair for pair in sure if pair not in pairs] == []
    missed, expected, promised = check_promise(texts, settings)
    assert promised > 50
    # Fixed seeds: the misses stay within the computed expectation plus four standard deviations.
    assert missed <= expected + 4 * np.sqrt(expected) + 1


def test_short_texts_are_searched_exactly() -> None:
    rng = random.Random(5)
    alphabet = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家"
    texts: list[str] = []
    for _ in range(150):
        base = "".join(rng.choice(alphabet) for _ in range(rng.randint(8, 60)))
        texts.append(base)
        for _ in range(rng.randint(0, 2)):
            chars = list(base)
            for _ in range(rng.randint(1, 4)):
                chars[rng.randrange(len(chars))] = rng.choice(alphabet)
            texts.append("".join(chars))
    missed, _, promised = check_promise(texts, CandidateSettings())
    assert promised > 50 and missed == 0


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8])
def test_prefix_search_finds_every_pair_at_the_threshold(threshold: float) -> None:
    """Random small sets with planted near-copies: every pair of Jaccard >= t is a candidate
    (prefix, size and positional filters together lose none)."""
    rng = np.random.default_rng(int(threshold * 10))
    for _ in range(60):
        count, vocabulary = int(rng.integers(2, 40)), int(rng.integers(5, 80))
        sets = [np.unique(rng.integers(0, vocabulary, int(rng.integers(1, 30)))) for _ in range(count)]
        for _ in range(count // 3):
            base = sets[int(rng.integers(0, count))]
            copy = base[rng.random(base.size) > 0.2] if base.size > 2 else base
            sets[int(rng.integers(0, count))] = np.unique(
                np.concatenate([copy, rng.integers(0, vocabulary, 2)])
            )
        hashes = np.concatenate(sets).astype(np.uint64)
        documents = np.repeat(np.arange(count), [len(one) for one in sets])
        found = {
            (int(key >> 32), int(key & 0xFFFFFFFF)) for key in prefix_pairs(hashes, documents, threshold)
        }
        for i in range(count):
            for j in range(i + 1, count):
                union = np.union1d(sets[i], sets[j]).size
                if np.intersect1d(sets[i], sets[j]).size >= threshold * union - 1e-9:
                    assert (i, j) in found


def test_a_late_common_token_is_no_candidate() -> None:
    """Two 10-token sets sharing only their 5th tokens share a prefix token (6 are kept at
    t = 0.5) but can share at most 6 tokens from there, below the 7 that t = 0.5 needs."""
    assert not positions_fit(np.array([10]), np.array([4]), np.array([10]), np.array([4]), 0.5)[0]
    assert positions_fit(np.array([10]), np.array([3]), np.array([10]), np.array([3]), 0.5)[0]
    # rarest tokens 0-3 of a and 100-103 of b (document frequency 1), then 4-9 common to both
    left, right = np.arange(10), np.concatenate([np.arange(100, 104), np.arange(4, 10)])
    filler = np.arange(4, 10)  # a third document makes tokens 4-9 more frequent than the rest
    hashes = np.concatenate([left, right, filler]).astype(np.uint64)
    documents = np.repeat(np.arange(3), [10, 10, 6])
    pairs = {(int(key >> 32), int(key & 0xFFFFFFFF)) for key in prefix_pairs(hashes, documents, 0.5)}
    assert (0, 1) not in pairs  # J = 6/14: prefix tokens 4 and 5 are common, but too late


def test_dev_samples_against_brute_force() -> None:
    texts: list[str] = []
    for name in ("dev/zh_news.jsonl", "dev/en_news.jsonl", "dev/zh_short.jsonl"):
        records = read_jsonl(shared_file(name))
        sizes: dict[str, int] = {}
        for record in records:
            sizes[record["cluster"]] = sizes.get(record["cluster"], 0) + 1
        grouped = [cluster for cluster, size in sizes.items() if size >= 2][:40]
        chosen = set(grouped)
        texts += [r["text"] for r in records if r["cluster"] in chosen]
        texts += [r["text"] for r in records if sizes[r["cluster"]] == 1][:150]
    for seed in (1, 9):
        missed, expected, promised = check_promise(texts, CandidateSettings(seed=seed))
        assert promised > 150
        assert missed <= expected + 4 * np.sqrt(expected) + 1


def test_chunks_give_the_pairs_of_one_batch() -> None:
    texts = edited_corpus(4, originals=40)
    whole = candidate_pairs(Shingles.of(texts))
    search = CandidateSearch()
    for low in range(0, len(texts), 37):
        search.add(Shingles.of(texts[low : low + 37]))
    assert np.array_equal(search.pairs(), whole)


def test_bands_sorted_in_forked_workers_give_the_same_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PARALLEL_BANDS documents the bands go to forked workers, a band each."""
    from neardup.dedup import candidates

    texts = edited_corpus(5, originals=40)
    alone, forked = CandidateSearch(), CandidateSearch()
    for search in (alone, forked):
        search.add(Shingles.of(texts))
    expected = alone.pair_tiles(workers=1).all()
    monkeypatch.setattr(candidates, "PARALLEL_BANDS", 0)
    assert expected.size > 100
    assert np.array_equal(forked.pair_tiles(workers=2).all(), expected)


def test_a_boilerplate_bucket_is_linked_not_expanded() -> None:
    text = " ".join(f"word{k}" for k in range(300))
    texts = [text] * 500
    pairs = candidate_pairs(Shingles.of(texts), CandidateSettings(max_bucket=200, hub=2))
    assert len(pairs) < 2 * 500  # hub pairs, not 500 * 499 / 2
    assert len(set(components(500, pairs[:, 0], pairs[:, 1]).tolist())) == 1


def test_classic_minhash_and_segments_run_on_the_same_interface() -> None:
    texts = edited_corpus(6, originals=20)
    shingles = Shingles.of(texts)
    i, j, jaccard = brute_force(shingles)
    sure = {(a, b) for a, b, s in zip(i.tolist(), j.tolist(), jaccard.tolist(), strict=True) if s >= 0.7}
    assert sure <= found_set(candidate_pairs(shingles, CandidateSettings(method="minhash")))
    exact = {(a, b) for a, b, s in zip(i.tolist(), j.tolist(), jaccard.tolist(), strict=True) if s == 1.0}
    segments = found_set(candidate_pairs(shingles, CandidateSettings(method="segments"), texts))
    assert exact <= segments
    with pytest.raises(InputError, match="needs the"):
        candidate_pairs(shingles, CandidateSettings(method="segments"))


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown candidate method"):
        CandidateSettings(method="magic")
    with pytest.raises(ConfigError, match="threshold"):
        CandidateSettings(threshold=0.0)


def verifier_test_texts() -> list[str]:
    texts = [
        *edited_corpus(8, originals=10),
        "",
        "短",
        "ab",
        "中ab",
        "全角ＡＢＣ１２３和中文 mixed text",
        "x" * 50,
    ]
    for name in ("dev/zh_news.jsonl", "dev/en_news.jsonl", "dev/zh_short.jsonl"):
        texts += [record["text"] for record in read_jsonl(shared_file(name))[:100]]
    return texts


def reference_sets(texts: list[str]) -> list[set[tuple[int, ...]]]:
    """The n-grams themselves, by the tokenizer, one text at a time: bigrams of a text with a
    Chinese character, 5-grams of the others, over the normalized letters and digits."""
    result = []
    for text in Normalizer().normalize_many(texts):
        size = HAN_SHINGLE if contains_han(text) else LATIN_SHINGLE
        batch = CharNgramTokenizer(size).tokenize_batch([text])
        codes = batch.codepoints.tolist()
        result.append(
            {tuple(codes[a:b]) for a, b in zip(batch.starts.tolist(), batch.ends.tolist(), strict=True)}
        )
    return result


def test_shingles_of_keys_the_n_grams_of_the_tokenizer() -> None:
    """One key for one n-gram: the sizes of the n-gram sets, and so every Jaccard, are those of
    the n-grams themselves — including a Latin text shorter than 5 letters against a bigram of
    a Chinese text ("ab" in "中ab")."""
    texts = verifier_test_texts()
    shingles, reference = shingles_of(texts), reference_sets(texts)
    assert shingles.count == len(reference)
    assert shingles.sizes.tolist() == [len(grams) for grams in reference]
    i, j = np.triu_indices(len(texts), 1)
    expected = [
        len(reference[a] & reference[b]) / len(reference[a] | reference[b])
        if reference[a] | reference[b]
        else 1.0
        for a, b in zip(i.tolist(), j.tolist(), strict=True)
    ]
    assert np.array_equal(shingles.jaccard(i, j), np.array(expected))
    assert shingles.jaccard([texts.index("ab")], [texts.index("中ab")])[0] == 0.5
    verifier = Shingles.of(texts)  # the verifier's sets are the same call's
    assert np.array_equal(verifier.hashes, shingles.hashes)
    assert np.array_equal(verifier.documents, shingles.documents)


def test_shingles_of_a_batch_too_big_for_one_sort_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = verifier_test_texts()
    whole = shingles_of(texts)
    monkeypatch.setattr(shingler, "_SHINGLE_BATCH", 7)
    split = shingles_of(texts)
    assert split.count == whole.count
    assert np.array_equal(split.hashes, whole.hashes) and np.array_equal(split.documents, whole.documents)


@pytest.mark.parametrize("run", [1, 5, 64, 1 << 11])
def test_shingles_sorted_in_runs_of_texts_are_one_sort(run: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chinese, Latin and under-n texts interleaved (their keys come in three parts, each in
    text order): sorted a few texts at a time, the keys are those of one sort of the batch."""
    rng = random.Random(run)
    pieces = ["中文字符", "报道", "ab", "x", "news story", "市场 market", "", "1", "。。"]
    texts = verifier_test_texts() + [
        " ".join(rng.choice(pieces) + rng.choice(string.ascii_lowercase) for _ in range(rng.randint(0, 30)))
        for _ in range(300)
    ]
    monkeypatch.setattr(shingler, "SORT_RUN", 1 << 40)
    whole = shingles_of(texts)
    monkeypatch.setattr(shingler, "SORT_RUN", run)
    runs = shingles_of(texts)
    assert np.array_equal(runs.hashes, whole.hashes) and np.array_equal(runs.documents, whole.documents)
    packed = (whole.documents.astype(np.uint64) << np.uint64(40)) | whole.hashes
    assert bool((packed[1:] > packed[:-1]).all())  # sorted by (text, key), no repeats
    assert whole.sizes.tolist() == [len(grams) for grams in reference_sets(texts)]


@pytest.mark.parametrize("pair_chunk", [1, 64, 1 << 22])
def test_shingle_sets_give_the_exact_jaccard_of_the_verifier(
    pair_chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pair (chunked down to one pair at a time), against the verifier's sets."""
    monkeypatch.setattr(shingle_sets, "PAIR_CHUNK", pair_chunk)
    monkeypatch.setattr(shingle_sets, "DOCUMENT_CHUNK", 7)
    texts = [*verifier_test_texts()[:80], "", ""]
    i, j = np.triu_indices(len(texts), 1)
    order = np.random.default_rng(1).permutation(len(i))
    i, j = i[order], j[order]
    sets = ShingleSets.of(len(texts), texts.__getitem__)
    assert sets.sizes.tolist() == Shingles.of(texts).sizes.tolist()
    assert np.array_equal(sets.jaccard(i, j), Shingles.of(texts).jaccard(i, j))
    assert sets.jaccard(np.array([80]), np.array([81])).tolist() == [1.0]  # two empty texts


def test_shingle_sets_in_forked_workers_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shingle_sets, "PARALLEL_PAIRS", 10)
    monkeypatch.setattr(shingle_sets, "DOCUMENT_CHUNK", 16)
    texts = verifier_test_texts()
    i, j = np.triu_indices(len(texts), 1)
    alone = ShingleSets.of(len(texts), texts.__getitem__)
    shared = ShingleSets.of(len(texts), texts.__getitem__, workers=2)
    assert np.array_equal(alone.offsets, shared.offsets) and np.array_equal(alone.keys, shared.keys)
    assert np.array_equal(shared.jaccard(i, j, workers=2), alone.jaccard(i, j))


@pytest.mark.parametrize("workers", [1, 2])
def test_shingle_sets_of_two_groups_give_the_jaccard_of_one(
    workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pairs between two separately shingled groups of texts (a row's first records held, the
    second ones shingled beside them) get the Jaccard of one set of all the texts."""
    monkeypatch.setattr(shingle_sets, "PARALLEL_PAIRS", 10)
    monkeypatch.setattr(shingle_sets, "PAIR_CHUNK", 64)
    texts = [*verifier_test_texts()[:60], "", ""]
    firsts, seconds = texts[::2], texts[1::2]
    i, j = np.meshgrid(np.arange(len(firsts)), np.arange(len(seconds)), indexing="ij")
    i, j = i.reshape(-1), j.reshape(-1)
    whole = ShingleSets.of(len(texts), texts.__getitem__)
    left = ShingleSets.of(len(firsts), firsts.__getitem__)
    right = ShingleSets.of(len(seconds), seconds.__getitem__)
    expected = whole.jaccard(2 * i, 2 * j + 1)
    assert np.array_equal(left.jaccard(i, j, workers, other=right), expected)
    assert expected.min() < 0.1 and expected.max() == 1.0  # unrelated, and the two empty texts


def test_check_bins_in_blocks_read_back_as_one_array(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_bins, "BLOCK_ROWS", 7)
    rng = np.random.default_rng(5)
    batches = [rng.integers(0, 256, size=(size, 16), dtype=np.uint8) for size in (3, 7, 20, 0, 1, 9)]
    bins = check_bins.CheckBins(16)
    for batch in batches:
        bins.extend(batch)
    whole = np.concatenate(batches)
    rows = rng.integers(0, len(whole), size=200)
    assert bins.count == len(whole) and np.array_equal(bins.take(rows), whole[rows])
    assert bins.take(np.zeros(0, dtype=np.int64)).shape == (0, 16)
