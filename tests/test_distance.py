"""Unit tests for :mod:`neardup.distance`: Hamming distance, array and hex forms."""

from __future__ import annotations

import numpy as np
import pytest

import neardup
from neardup import from_hex, hamming, hamming_many, hex_many, to_array, to_hex, to_ints
from neardup.distance import check_fingerprint

MAX_64 = (1 << 64) - 1
MAX_128 = (1 << 128) - 1

# --- hamming ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        (0, 0, 0),
        (0b1011, 0b0001, 2),
        (0, MAX_64, 64),
        (0, MAX_128, 128),
        (1 << 127, 1, 2),
        (0xF0F0, 0x0F0F, 16),
    ],
)
def test_hamming(a: int, b: int, distance: int) -> None:
    assert hamming(a, b) == distance
    assert hamming(b, a) == distance


def test_hamming_many_is_element_wise_uint8() -> None:
    left = np.array([0, 1, MAX_64, 0b1010], dtype=np.uint64)
    right = np.array([0, 0, 0, 0b0101], dtype=np.uint64)
    result = hamming_many(left, right)
    assert result.dtype == np.uint8
    assert result.tolist() == [0, 1, 64, 4]


def test_hamming_many_accepts_lists_of_python_ints() -> None:
    assert hamming_many([MAX_64, 3], [0, 0]).tolist() == [64, 2]


@pytest.mark.parametrize("scalar", [0, MAX_64, np.uint64(5)])
def test_hamming_many_broadcasts_a_scalar(scalar: int) -> None:
    values = [0, 5, MAX_64, 1 << 63]
    array = to_array(values, 64)
    expected = [hamming(value, int(scalar)) for value in values]
    assert hamming_many(array, scalar).tolist() == expected
    assert hamming_many(scalar, array).tolist() == expected
    assert hamming_many(array, scalar).shape == (len(values),)


def test_hamming_many_of_two_scalars() -> None:
    assert int(hamming_many(0, MAX_64)) == 64


def test_hamming_many_broadcasts_2d_against_1d() -> None:
    queries = np.array([[0], [MAX_64]], dtype=np.uint64)  # (2, 1) against (3,) -> (2, 3)
    stored = np.array([0, 1, 3], dtype=np.uint64)
    assert hamming_many(queries, stored).tolist() == [[0, 1, 2], [64, 63, 62]]


def test_hamming_many_128_rows() -> None:
    values = [0, 1 << 127, MAX_128, (1 << 64) | 1]
    array = to_array(values, 128)
    assert array.shape == (4, 2)
    result = hamming_many(array, to_array([0, 0, 0, 0], 128))
    assert result.dtype == np.uint8
    assert result.tolist() == [0, 1, 128, 2]


def test_hamming_many_broadcasts_one_128_bit_row() -> None:
    values = [0, 1 << 127, MAX_128, (1 << 64) | 1]
    query = (1 << 127) | 1
    row = to_array([query], 128)[0]
    assert row.shape == (2,)
    assert hamming_many(to_array(values, 128), row).tolist() == [hamming(v, query) for v in values]


def test_hamming_many_128_is_symmetric_with_a_row_on_the_left() -> None:
    values = [0, 1 << 127, MAX_128]
    array = to_array(values, 128)
    row = to_array([1], 128)[0]
    assert hamming_many(row, array).tolist() == hamming_many(array, row).tolist() == [1, 2, 127]


def test_hamming_many_bits_argument_disambiguates_two_column_arrays() -> None:
    # a (n, 2) array is read as 128-bit rows unless bits says the words are separate fingerprints
    pairs = to_array([1, 3, MAX_64, 0], 64).reshape(2, 2)
    zeros = np.zeros((2, 2), dtype=np.uint64)
    assert hamming_many(pairs, zeros).tolist() == [3, 64]
    assert hamming_many(pairs, zeros, bits=128).tolist() == [3, 64]
    assert hamming_many(pairs, zeros, bits=64).tolist() == [[1, 2], [64, 0]]


# --- hex -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "bits", "text"),
    [
        (0, 32, "00000000"),
        (5, 32, "00000005"),
        ((1 << 32) - 1, 32, "ffffffff"),
        (0, 64, "0000000000000000"),
        (0xABC, 64, "0000000000000abc"),
        (MAX_64, 64, "ffffffffffffffff"),
        (1 << 63, 64, "8000000000000000"),
        (0, 128, "0" * 32),
        (1, 128, "0" * 31 + "1"),
        (1 << 127, 128, "8" + "0" * 31),
        (MAX_128, 128, "f" * 32),
    ],
)
def test_to_hex_is_fixed_width_lower_case(value: int, bits: int, text: str) -> None:
    assert to_hex(value, bits) == text
    assert len(text) == bits // 4
    assert from_hex(text, bits) == value


def test_to_hex_defaults_to_64_bits() -> None:
    assert to_hex(1) == "0000000000000001"
    assert from_hex("0000000000000001") == 1


@pytest.mark.parametrize(("value", "bits"), [(1 << 64, 64), (1 << 32, 32), (-1, 64)])
def test_to_hex_rejects_values_that_do_not_fit(value: int, bits: int) -> None:
    with pytest.raises(neardup.NeardupError):
        to_hex(value, bits)


def test_from_hex_accepts_upper_case() -> None:
    assert from_hex("ABCDEF0123456789") == 0xABCDEF0123456789


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("", 64),
        ("0" * 15, 64),
        ("0" * 17, 64),
        ("0" * 16, 32),
        ("0" * 16, 128),
        ("0" * 32, 64),
        ("ff", 32),
    ],
)
def test_from_hex_wrong_width_raises_input_error(text: str, bits: int) -> None:
    with pytest.raises(neardup.InputError, match="hex digits"):
        from_hex(text, bits)


@pytest.mark.parametrize(
    "text", ["g" * 16, "000000000000000z", " " * 16, "00000000 0000000", "ffffffff-fffffff"]
)
def test_from_hex_non_hex_raises_input_error(text: str) -> None:
    with pytest.raises(neardup.InputError, match="not hexadecimal"):
        from_hex(text, 64)


def test_input_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        from_hex("xyz", 64)


@pytest.mark.parametrize(
    "text",
    [
        "-000000000000001",
        "+000000000000001",
        "0x00000000000001",
        "0000_00000000001",
        " 000000000000001",
        "000000000000001\n",
        "０" * 16,  # full-width digit zero
    ],
)
def test_from_hex_rejects_what_to_hex_never_writes(text: str) -> None:
    with pytest.raises(neardup.InputError):
        from_hex(text, 64)


@pytest.mark.parametrize("bits", [0, 16, 48, 256])
def test_from_hex_bad_bits_raise_config_error(bits: int) -> None:
    with pytest.raises(neardup.ConfigError):
        from_hex("0" * max(bits // 4, 1), bits)


@pytest.mark.parametrize("bits", [32, 64, 128])
def test_hex_many_matches_to_hex(bits: int) -> None:
    values = [0, 1, (1 << bits) - 1, 0x1234_5678_9ABC_DEF0_1357_9BDF_2468_ACE0 & ((1 << bits) - 1)]
    assert hex_many(to_array(values, bits), bits) == [to_hex(value, bits) for value in values]


def test_hex_many_of_an_empty_array() -> None:
    assert hex_many(to_array([], 64), 64) == []
    assert hex_many(to_array([], 128), 128) == []


# --- array forms -----------------------------------------------------------------------------


def test_to_array_128_is_low_then_high_word() -> None:
    value = (0x1111_2222_3333_4444 << 64) | 0x5555_6666_7777_8888
    array = to_array([value, 1], 128)
    assert array.dtype == np.uint64
    assert array.tolist() == [[0x5555_6666_7777_8888, 0x1111_2222_3333_4444], [1, 0]]
    assert to_ints(array) == [value, 1]


@pytest.mark.parametrize("bits", [32, 64])
def test_to_array_up_to_64_bits_is_one_uint64(bits: int) -> None:
    values = [0, 7, (1 << bits) - 1]
    array = to_array(values, bits)
    assert array.dtype == np.uint64
    assert array.shape == (3,)
    assert to_ints(array) == values
    assert all(type(value) is int for value in to_ints(array))


def test_to_array_accepts_any_iterable() -> None:
    assert to_array(iter([1, 2]), 64).tolist() == [1, 2]
    assert to_array((v for v in [1 << 100]), 128).tolist() == [[0, 1 << 36]]


def test_empty_arrays() -> None:
    assert to_array([], 64).shape == (0,)
    assert to_array([], 128).shape == (0, 2)
    assert to_ints(to_array([], 64)) == []
    assert to_ints(to_array([], 128)) == []


@pytest.mark.parametrize("bits", [0, 16, 48, 256])
def test_to_array_bad_bits_raise_config_error(bits: int) -> None:
    with pytest.raises(neardup.ConfigError):
        to_array([1], bits)


# --- check_fingerprint -----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "bits"), [(0, 32), ((1 << 32) - 1, 32), (MAX_64, 64), (MAX_128, 128)])
def test_check_fingerprint_accepts_values_that_fit(value: int, bits: int) -> None:
    assert check_fingerprint(value, bits) == value


@pytest.mark.parametrize(
    ("value", "bits"),
    [(-1, 64), (1 << 64, 64), (1 << 32, 32), (1 << 128, 128), (True, 64), (1.0, 64), ("1", 64), (None, 64)],
)
def test_check_fingerprint_rejects_values_that_do_not_fit(value: object, bits: int) -> None:
    with pytest.raises(neardup.ConfigError):
        check_fingerprint(value, bits)  # type: ignore[arg-type]
