"""Unit and property tests for :mod:`neardup.blocks`: block layouts, key extraction against a
bit-by-bit reference, second-hash sub-blocks, the exactness guarantee and the auto-tuner."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup import ConfigError, to_array
from neardup.blocks import DEFAULT_MAX_TABLES, BitSelection, BlockScheme

WIDTHS = (32, 64, 128)


def uint(bits: int) -> st.SearchStrategy[int]:
    return st.integers(min_value=0, max_value=(1 << bits) - 1)


def words_of(values: list[int], bits: int) -> np.ndarray:
    """Python ints → the (n, words) uint64 layout the block code reads."""
    return to_array(values, bits).reshape(len(values), 2 if bits == 128 else 1)


def reference_key(value: int, positions: tuple[int, ...]) -> int:
    """The key read one bit at a time, most significant first, first 64 bits only."""
    key = 0
    for position in positions[:64]:
        key = (key << 1) | ((value >> position) & 1)
    return key


def flip(value: int, positions: list[int]) -> int:
    for position in positions:
        value ^= 1 << position
    return value


@st.composite
def schemes(draw: st.DrawFn, max_tables: int = 200, max_distance: int = 8) -> BlockScheme:
    """A random valid (m, t) scheme at 32, 64 or 128 bits with at most ``max_tables`` tables."""
    bits = draw(st.sampled_from(WIDTHS))
    k = draw(st.integers(0, max_distance))
    m = draw(st.one_of(st.integers(k + 1, min(bits, k + 10)), st.integers(k + 1, bits)))
    choices = [t for t in range(1, m - k + 1) if math.comb(m, t) <= max_tables]
    if not choices:  # only when m itself is above the budget: fall back to the pigeonhole scheme
        return BlockScheme(bits, k)
    return BlockScheme(bits, k, m, draw(st.sampled_from(choices)))


# --- layouts ---------------------------------------------------------------------------------


def test_default_is_the_pigeonhole_scheme() -> None:
    scheme = BlockScheme(64, 3)
    assert scheme.num_blocks == 4
    assert scheme.key_blocks == 1
    assert scheme.table_count == len(scheme.tables) == 4
    assert [table.bit_count for table in scheme.tables] == [16, 16, 16, 16]
    assert scheme.key_bits == 16
    assert scheme.words == 1
    # most significant block first: table 0 keys on bits 63..48
    assert scheme.tables[0].positions == tuple(range(63, 47, -1))
    assert scheme.tables[3].positions == tuple(range(15, -1, -1))
    assert BlockScheme() == scheme


@pytest.mark.parametrize(("bits", "k"), [(32, 0), (32, 3), (64, 1), (64, 5), (128, 3), (128, 7)])
def test_pigeonhole_for_any_distance(bits: int, k: int) -> None:
    scheme = BlockScheme(bits, k)
    assert scheme.blocks_count == k + 1
    assert scheme.table_count == k + 1
    assert scheme.tables == scheme.blocks
    assert scheme.words == (2 if bits == 128 else 1)


MANKU = [
    (32, 3, 5, 2),
    (32, 3, 7, 4),
    (32, 0, 1, 1),
    (32, 3, 32, 29),
    (64, 3, 5, 2),
    (64, 3, 6, 3),
    (64, 3, 7, 2),
    (64, 3, 10, 1),
    (64, 2, 64, 1),
    (128, 3, 4, 1),
    (128, 3, 6, 2),
    (128, 1, 4, 3),
    (128, 5, 9, 4),
    (128, 6, 13, 3),
]


@pytest.mark.parametrize(("bits", "k", "m", "t"), MANKU)
def test_manku_layout(bits: int, k: int, m: int, t: int) -> None:
    scheme = BlockScheme(bits, k, m, t)
    assert scheme.table_count == len(scheme.tables) == math.comb(m, t)
    # the blocks partition all bits exactly once, most significant first, contiguous
    blocks = scheme.blocks
    assert len(blocks) == m
    flat = [position for block in blocks for position in block.positions]
    assert flat == list(range(bits - 1, -1, -1))
    sizes = [block.bit_count for block in blocks]
    assert max(sizes) - min(sizes) <= 1
    assert sorted(sizes, reverse=True) == sizes  # the larger blocks come first
    # each table is the union of a distinct t-subset of the blocks, in block order
    expected = {
        tuple(position for index in combination for position in blocks[index].positions)
        for combination in itertools.combinations(range(m), t)
    }
    assert {table.positions for table in scheme.tables} == expected
    assert len(set(scheme.tables)) == scheme.table_count
    assert scheme.key_bits == min(table.bit_count for table in scheme.tables)
    assert scheme.key_bits == sum(sorted(sizes)[:t])


@settings(max_examples=80, deadline=None)
@given(scheme=schemes())
def test_random_schemes_partition_the_bits(scheme: BlockScheme) -> None:
    positions = sorted(position for block in scheme.blocks for position in block.positions)
    assert positions == list(range(scheme.bits))
    sizes = [block.bit_count for block in scheme.blocks]
    assert max(sizes) - min(sizes) <= 1
    assert scheme.table_count == math.comb(scheme.blocks_count, scheme.key_blocks)
    for table in scheme.tables:
        assert table.bit_count == len(set(table.positions))


# --- key extraction --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(scheme=schemes(max_tables=60), data=st.data())
def test_keys_match_a_bit_by_bit_reference(scheme: BlockScheme, data: st.DataObject) -> None:
    values = data.draw(st.lists(uint(scheme.bits), min_size=1, max_size=12))
    values.append((1 << scheme.bits) - 1)
    keys = scheme.keys(words_of(values, scheme.bits))
    assert keys.dtype == np.uint64
    assert keys.shape == (len(values), scheme.table_count)
    for row, value in enumerate(values):
        for column, table in enumerate(scheme.tables):
            expected = reference_key(value, table.positions)
            assert int(keys[row, column]) == expected
            assert table.extract_int(value) == expected


@settings(max_examples=100, deadline=None)
@given(data=st.data(), bits=st.sampled_from(WIDTHS))
def test_any_bit_selection_extracts_like_the_reference(data: st.DataObject, bits: int) -> None:
    # arbitrary subsets in arbitrary order, including runs crossing the 64-bit word boundary
    positions = tuple(data.draw(st.lists(st.integers(0, bits - 1), unique=True, max_size=bits)))
    if data.draw(st.booleans()):
        positions = tuple(sorted(positions, reverse=True))
    selection = BitSelection(positions)
    values = data.draw(st.lists(uint(bits), min_size=1, max_size=8))
    extracted = selection.extract(words_of(values, bits))
    for row, value in enumerate(values):
        assert int(extracted[row]) == reference_key(value, positions)
        assert selection.extract_int(value) == reference_key(value, positions)
    # the mask holds exactly the selected bits, low word first
    mask = selection.mask(2 if bits == 128 else 1)
    assert sum(int(word) << (64 * index) for index, word in enumerate(mask)) == sum(1 << p for p in positions)
    # the segments cover the selection in key order
    covered = [
        word * 64 + shift + offset
        for word, shift, length in selection.segments
        for offset in range(length - 1, -1, -1)
    ]
    assert tuple(covered) == positions


@pytest.mark.parametrize("bits", WIDTHS)
def test_extract_known_values(bits: int) -> None:
    scheme = BlockScheme(bits, 3)
    width = bits // 4
    # every block holds its own index in its lowest bits
    value = sum(index << (bits - width * (index + 1)) for index in range(4))
    keys = scheme.keys(words_of([value, 0], bits))
    assert keys.tolist() == [[0, 1, 2, 3], [0, 0, 0, 0]]


def test_keys_wider_than_64_bits_keep_their_first_64_bits() -> None:
    scheme = BlockScheme(128, 1, 4, 3)  # tables of 3 × 32 = 96 bits
    assert scheme.key_bits == 96
    value = 0x0123_4567_89AB_CDEF_FEDC_BA98_7654_3210
    table = scheme.tables[0]  # blocks 0, 1, 2: bits 127..32
    full = value >> 32
    assert table.extract_int(value) == full >> 32 == value >> 64
    assert int(table.extract(words_of([value], 128))[0]) == value >> 64
    # a table skipping the second block: bits 127..96 then 63..0, first 64 bits kept
    skipping = scheme.tables[2]
    assert skipping.positions[:32] == tuple(range(127, 95, -1))
    assert skipping.positions[32:64] == tuple(range(63, 31, -1))
    expected = ((value >> 96) << 32) | ((value >> 32) & 0xFFFF_FFFF)
    assert skipping.extract_int(value) == expected
    assert int(scheme.keys(words_of([value], 128))[0, 2]) == expected


def test_prefix() -> None:
    selection = BlockScheme(64, 3).tables[1]
    assert selection.prefix(5).positions == tuple(range(47, 42, -1))
    assert selection.prefix(100) == selection
    assert selection.prefix(0).bit_count == 0
    assert selection.prefix(-3).bit_count == 0
    assert int(selection.prefix(0).extract(words_of([12345], 64))[0]) == 0


# --- second-hash sub-blocks ------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(scheme=schemes(max_tables=60), data=st.data())
def test_sub_blocks_partition_the_bits_outside_the_key(scheme: BlockScheme, data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(scheme.tables))
    if data.draw(st.booleans()):
        key = key.prefix(data.draw(st.integers(0, key.bit_count)))
    outside = [p for p in range(scheme.bits - 1, -1, -1) if p not in set(key.positions)]
    pieces = scheme.sub_blocks(key)
    if len(outside) <= scheme.max_distance:
        assert pieces == (BitSelection(()),)
        return
    assert len(pieces) == scheme.max_distance + 1
    assert [p for piece in pieces for p in piece.positions] == outside
    sizes = [piece.bit_count for piece in pieces]
    assert min(sizes) >= 1
    assert max(sizes) - min(sizes) <= 1


def test_sub_blocks_of_the_pigeonhole_scheme() -> None:
    scheme = BlockScheme(64, 3)
    pieces = scheme.sub_blocks(scheme.tables[0])
    assert [piece.positions for piece in pieces] == [
        tuple(range(47, 35, -1)),
        tuple(range(35, 23, -1)),
        tuple(range(23, 11, -1)),
        tuple(range(11, -1, -1)),
    ]


def test_sub_blocks_when_too_few_bits_remain() -> None:
    scheme = BlockScheme(32, 3, 32, 29)  # keys of 29 bits leave 3 = max_distance bits outside
    assert scheme.sub_blocks(scheme.tables[0]) == (BitSelection(()),)
    full = BitSelection(tuple(range(31, -1, -1)))
    assert scheme.sub_blocks(full) == (BitSelection(()),)
    # one more bit outside: k + 1 pieces of one bit each
    pieces = scheme.sub_blocks(scheme.tables[0].prefix(28))
    assert [piece.bit_count for piece in pieces] == [1, 1, 1, 1]


# --- the guarantee ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bits": 64, "max_distance": 3, "num_blocks": 4, "key_blocks": 2}, "num_blocks - max_distance = 1"),
        ({"bits": 64, "max_distance": 3, "num_blocks": 6, "key_blocks": 4}, "raise num_blocks to at least 7"),
        ({"bits": 32, "max_distance": 3, "num_blocks": 3}, "cannot guarantee max_distance=3"),
        ({"bits": 64, "max_distance": 3, "num_blocks": 8, "key_blocks": 0}, "key_blocks must be from 1"),
        ({"bits": 64, "max_distance": 3, "num_blocks": 65}, "num_blocks must be from 1 to 64"),
        ({"bits": 32, "max_distance": 1, "num_blocks": 33}, "num_blocks must be from 1 to 32"),
        ({"bits": 64, "max_distance": 3, "num_blocks": 0}, "num_blocks must be from 1 to 64"),
        ({"bits": 64, "max_distance": 64}, "max_distance must be an integer from 0 to 63"),
        ({"bits": 32, "max_distance": 32}, "from 0 to 31"),
        ({"bits": 128, "max_distance": -1}, "from 0 to 127"),
        ({"bits": 64, "max_distance": 2.0}, "max_distance must be an integer"),
        ({"bits": 64, "max_distance": True}, "max_distance must be an integer"),
        ({"bits": 48, "max_distance": 3}, "bits must be 32, 64 or 128"),
    ],
)
def test_invalid_schemes_raise_config_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BlockScheme(**kwargs)


@settings(max_examples=100, deadline=None)
@given(scheme=schemes(), data=st.data())
def test_guarantee_some_table_key_is_equal(scheme: BlockScheme, data: st.DataObject) -> None:
    bits, k = scheme.bits, scheme.max_distance
    a = data.draw(uint(bits))
    flips = data.draw(st.lists(st.integers(0, bits - 1), unique=True, max_size=k))
    b = flip(a, flips)
    assert (a ^ b).bit_count() <= k
    assert any(table.extract_int(a) == table.extract_int(b) for table in scheme.tables)
    keys = scheme.keys(words_of([a, b], bits))
    assert bool(np.any(keys[0] == keys[1]))


@pytest.mark.parametrize(("bits", "k", "m"), [(32, 2, 5), (64, 3, 4), (64, 3, 7), (128, 4, 9)])
def test_guarantee_is_tight(bits: int, k: int, m: int) -> None:
    # tables on t = m - k + 1 blocks (valid only up to distance k - 1) miss a pair at distance k
    # that differs in k different blocks: every t-subset meets those k blocks
    scheme = BlockScheme(bits, k - 1, m, m - k + 1)
    a = 0x5A5A_5A5A_5A5A_5A5A_5A5A_5A5A_5A5A_5A5A & ((1 << bits) - 1)
    b = flip(a, [scheme.blocks[index].positions[0] for index in range(k)])
    assert (a ^ b).bit_count() == k
    assert not any(table.extract_int(a) == table.extract_int(b) for table in scheme.tables)


# --- auto ------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("size", [-5, 0, 1, 2, 50])
def test_auto_is_pigeonhole_for_small_sizes(bits: int, size: int) -> None:
    assert BlockScheme.auto(size, bits, 3) == BlockScheme(bits, 3)
    assert BlockScheme.auto(size, bits, 1) == BlockScheme(bits, 1)


@pytest.mark.parametrize("bits", [64, 128])
def test_auto_keeps_16_bit_keys_for_ten_thousand(bits: int) -> None:
    assert BlockScheme.auto(10_000, bits, 3) == BlockScheme(bits, 3)


@pytest.mark.parametrize("bits", WIDTHS)
@pytest.mark.parametrize("k", [0, 1, 3, 6])
@pytest.mark.parametrize("size", [10**6, 10**7, 10**9])
def test_auto_for_large_sizes_is_a_valid_exact_scheme(bits: int, k: int, size: int) -> None:
    scheme = BlockScheme.auto(size, bits, k)
    assert scheme.bits == bits
    assert scheme.max_distance == k
    assert 1 <= scheme.key_blocks <= scheme.blocks_count - k
    assert scheme.table_count <= DEFAULT_MAX_TABLES
    # a fresh construction passes the constructor's check
    assert BlockScheme.from_dict(scheme.to_dict()) == scheme


def test_auto_prefers_longer_keys_for_large_64_bit_collections() -> None:
    scheme = BlockScheme.auto(10**7, 64, 3)
    assert scheme != BlockScheme(64, 3)
    assert scheme.key_bits > 16


@pytest.mark.parametrize("max_tables", [4, 5, 6, 10, 20])
def test_auto_honours_max_tables(max_tables: int) -> None:
    for size in (10**7, 10**9):
        scheme = BlockScheme.auto(size, 64, 3, max_tables=max_tables)
        assert scheme.table_count <= max_tables
    assert BlockScheme.auto(10**9, 64, 3, max_tables=4) == BlockScheme(64, 3)


@pytest.mark.parametrize(("k", "max_tables"), [(3, 3), (3, 0), (0, 0), (6, 6)])
def test_auto_rejects_max_tables_below_k_plus_1(k: int, max_tables: int) -> None:
    with pytest.raises(ConfigError, match=f"needs at least {k + 1} tables"):
        BlockScheme.auto(10**7, 64, k, max_tables=max_tables)


def test_auto_rejects_bad_bits_and_distance() -> None:
    with pytest.raises(ConfigError, match="bits"):
        BlockScheme.auto(100, 16, 3)
    with pytest.raises(ConfigError, match="max_distance"):
        BlockScheme.auto(100, 32, 32)


# --- serialisation ---------------------------------------------------------------------------


@pytest.mark.parametrize(("bits", "k", "m", "t"), MANKU)
def test_to_dict_round_trip(bits: int, k: int, m: int, t: int) -> None:
    scheme = BlockScheme(bits, k, m, t)
    data = scheme.to_dict()
    assert data == {"bits": bits, "max_distance": k, "num_blocks": m, "key_blocks": t}
    assert BlockScheme.from_dict(data) == scheme
    assert BlockScheme.from_dict(data).tables == scheme.tables


def test_to_dict_fills_in_the_default_block_count() -> None:
    assert BlockScheme(64, 5).to_dict()["num_blocks"] == 6
    assert BlockScheme.from_dict({}) == BlockScheme(64, 3)
    assert BlockScheme.from_dict({"bits": 128}) == BlockScheme(128, 3, 4, 1)


def test_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(ConfigError, match="unknown block scheme settings: blocks, tables"):
        BlockScheme.from_dict({"bits": 64, "tables": 4, "blocks": 4})


def test_from_dict_validates() -> None:
    with pytest.raises(ConfigError, match="cannot guarantee"):
        BlockScheme.from_dict({"bits": 64, "max_distance": 3, "num_blocks": 4, "key_blocks": 2})


def test_describe() -> None:
    text = BlockScheme(64, 3, 6, 3).describe()
    assert "6 blocks" in text
    assert "20 tables" in text
    assert "keys of 31+ bits" in text  # blocks of 11, 11, 11, 11, 10, 10 bits
    assert "distance 3 at 64 bits" in text
