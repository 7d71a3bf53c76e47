"""Rows → weighted features → fingerprints → duplicate groups (no database needed)."""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from neardup import ConfigError, Fingerprinter, InputError, to_ints
from neardup.io.record import ErrorReport
from neardup.records.dedup import (
    FeatureStore,
    Verification,
    field_agreement,
    find_duplicate_records,
    jaccard,
    verification,
)
from neardup.records.schema import (
    SAMPLE_ROWS,
    FieldSpec,
    RecordSchema,
    ResolvedField,
    ResolvedSchema,
    RowChunk,
    RowFeaturizer,
    parse_field,
    schema_from_mapping,
)
from neardup.records.values import (
    infer_kind,
    is_null,
    looks_numeric,
    normalize_date,
    normalize_number,
    record_key,
    word_count,
)

COLUMNS = ["id", "name", "phone", "filed", "amount", "content"]
ROWS: list[tuple[Any, ...]] = [
    (
        1,
        "张三",
        "13800138000",
        "2015-12-14",
        "1,000",
        "小区门口垃圾长期无人清理，气味难闻，希望城管部门尽快处理",
    ),
    (2, "李四", "13900000000", None, 250, "The street light outside number 12 has been broken for two weeks"),
    (
        3,
        "张三",
        "13800138000",
        "2015/12/14",
        "1000",
        "小区门口垃圾长期无人清理，气味很难闻，希望城管部门尽快处理！",
    ),
    (
        4,
        "Ｊｏｈｎ  SMITH",
        "",
        date(2016, 1, 2),
        Decimal("250.00"),
        "Noise from the building site every night",
    ),
    (5, "王五", None, None, None, None),
    (6, "john smith", None, "2016-01-02", 250.0, "Noise from the building site every night."),
]


def chunk(rows: list[tuple[Any, ...]] = ROWS, first: int = 1) -> RowChunk:
    return RowChunk.from_rows(rows, len(COLUMNS), first)


# -- values ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1,000", "1000"),
        ("1000", "1000"),
        ("1000.0", "1000"),
        (1000, "1000"),
        (1000.0, "1000"),
        (Decimal("1E+3"), "1000"),
        ("１，０００", "1000"),
        ("-3.50", "-3.5"),
        ("1,000.25", "1000.25"),
        ("0.0", "0"),
        ("007", "7"),
    ],
)
def test_numbers_are_normalised(value: Any, expected: str) -> None:
    assert normalize_number(value) == expected


@pytest.mark.parametrize("value", ["12a", "1,00", "", "1.2.3", True, b"1"])
def test_non_numbers_are_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        normalize_number(value)


@pytest.mark.parametrize(
    "value",
    ["2015-12-14", "2015/12/14", "2015.12.14", "2015年12月14日", " 2015-12-14 ", date(2015, 12, 14),
     datetime(2015, 12, 14), "2015-12-14 00:00:00", "20151214"],
)  # fmt: skip
def test_dates_are_normalised(value: Any) -> None:
    assert normalize_date(value) == "2015-12-14"


def test_times_other_than_midnight_are_kept() -> None:
    assert normalize_date("2015-12-14T09:30:05+08:00") == "2015-12-14 09:30:05"
    assert normalize_date(datetime(2015, 12, 14, 9, 30)) == "2015-12-14 09:30:00"


@pytest.mark.parametrize("value", ["14/12/2015", "2015-13-01", "2015-02-30", "yesterday", 20151214])
def test_ambiguous_or_invalid_dates_are_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        normalize_date(value)


def test_nulls() -> None:
    assert all(is_null(value) for value in (None, "", "  \t", math.nan, Decimal("NaN")))
    assert not any(is_null(value) for value in (0, "0", False, "x"))


def test_keys() -> None:
    assert record_key(5) == 5 and record_key(Decimal("5")) == 5 and record_key(5.0) == 5
    assert record_key("a-1") == "a-1" and record_key(date(2015, 1, 2)) == "2015-01-02"
    for bad in (None, "", True, b"\x00"):
        with pytest.raises(ValueError):
            record_key(bad)


def test_inference() -> None:
    assert infer_kind([1, 2, None, 3.5]) == "number"
    assert infer_kind(["1,000", "250", ""]) == "number"
    assert infer_kind(["0800", "0712"]) == "short"  # leading zeros make identifiers
    assert infer_kind(["2015-12-14", "2016/01/02"]) == "date"
    assert infer_kind([date(2015, 1, 1), datetime(2016, 1, 1)]) == "date"
    assert infer_kind(["John Smith", "Mary"]) == "short"
    assert infer_kind(["The street light outside number 12 is broken", "Noise every night here"]) == "text"
    assert infer_kind(["小区门口垃圾长期无人清理", "希望城管部门尽快处理"]) == "text"
    assert infer_kind(["张三", "李四"]) == "short"
    assert infer_kind([b"\x89PNG", None]) == "ignore"
    assert infer_kind([None, ""]) == "short"
    assert word_count("广州市 city") == 2.5
    assert not looks_numeric("0800")


# -- the schema -----------------------------------------------------------------------------------


def test_parse_field() -> None:
    assert parse_field("name") == FieldSpec("name")
    assert parse_field("name:3") == FieldSpec("name", weight=3.0)
    assert parse_field("notes:TEXT") == FieldSpec("notes", "text")
    assert parse_field("a:b:date:1.5") == FieldSpec("a:b", "date", 1.5)
    with pytest.raises(ConfigError, match="weight must be above 0"):
        parse_field("name:0")
    with pytest.raises(ConfigError, match="no column name"):
        parse_field(":3")


def test_schema_resolution_infers_kinds_and_skips_the_key() -> None:
    resolved = RecordSchema("id").resolve(COLUMNS, chunk().columns)
    kinds = {column.name: (column.kind, column.weight) for column in resolved.fields}
    assert kinds == {
        "name": ("short", 2.0),
        "phone": ("number", 2.0),
        "filed": ("date", 2.0),
        "amount": ("number", 2.0),
        "content": ("text", 1.0),
    }
    assert "key id" in resolved.describe() and "content: text ×1 (auto)" in resolved.describe()


def test_schema_overrides_ignore_and_only_listed() -> None:
    schema = RecordSchema(
        "id", (FieldSpec("phone", "short", 5), FieldSpec("content", "ignore")), ignore=("amount",)
    )
    resolved = schema.resolve(COLUMNS, chunk().columns)
    assert [(c.name, c.kind, c.weight, c.inferred) for c in resolved.fields] == [
        ("name", "short", 2.0, True),
        ("phone", "short", 5.0, False),
        ("filed", "date", 2.0, True),
    ]
    assert resolved.ignored == ("amount", "content")
    only = RecordSchema("id", (FieldSpec("name"),), only_listed=True)
    assert [c.name for c in only.resolve(COLUMNS, chunk().columns).fields] == ["name"]
    assert only.columns_to_read(COLUMNS) == ["id", "name"]


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (RecordSchema("ID"), "no key column 'ID' in the source; did you mean 'id'"),
        (
            RecordSchema("id", (FieldSpec("nmae"),)),
            r"no column 'nmae' .* did you mean 'name'.*check fields\)",
        ),
        (RecordSchema("id", ignore=("contents",)), r"check ignore\)"),
        (RecordSchema("id", only_listed=True), "no columns left to compare"),
    ],
)
def test_schema_errors_name_the_column_and_the_fix(schema: RecordSchema, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        schema.resolve(COLUMNS, chunk().columns)


def test_schema_refusals() -> None:
    with pytest.raises(ConfigError, match="key column 'id' cannot be a field"):
        RecordSchema("id", (FieldSpec("id"),))
    with pytest.raises(ConfigError, match="given twice"):
        RecordSchema("id", (FieldSpec("a"), FieldSpec("a", weight=2)))
    with pytest.raises(ConfigError, match="both a field and ignored"):
        RecordSchema("id", (FieldSpec("a"),), ignore=("a",))
    with pytest.raises(ConfigError, match="two columns named 'x'"):
        RecordSchema("id").resolve(["id", "x", "x"], [[1], [1], [1]])
    with pytest.raises(ConfigError, match="unknown kind"):
        FieldSpec("a", "blob")


def test_schema_from_toml_mapping() -> None:
    data = {
        "key": "id",
        "ignore": ["amount"],
        "fields": {"name": 3, "content": "text", "phone": {"kind": "short"}},
    }
    schema = schema_from_mapping(data)
    assert schema.fields == (
        FieldSpec("name", weight=3.0),
        FieldSpec("content", "text"),
        FieldSpec("phone", "short"),
    )
    assert schema_from_mapping(data, key="pk").key == "pk"
    with pytest.raises(ConfigError, match="key column must be named"):
        schema_from_mapping({})
    with pytest.raises(ConfigError, match="unknown setting"):
        schema_from_mapping({"key": "id", "fields": {"a": {"wieght": 2}}})


# -- features and fingerprints --------------------------------------------------------------------


def featurizer(schema: RecordSchema | None = None, rows: list[tuple[Any, ...]] = ROWS) -> RowFeaturizer:
    resolved = (schema or RecordSchema("id")).resolve(COLUMNS, chunk(rows).columns)
    return RowFeaturizer(resolved)


def row_features(rows: list[tuple[Any, ...]] = ROWS) -> list[list[tuple[str, float]]]:
    found = featurizer(rows=rows).features(chunk(rows))
    per_row: list[list[tuple[str, float]]] = [[] for _ in rows]
    for row, name, weight in zip(
        found.documents.tolist(), found.features, found.weights.tolist(), strict=True
    ):
        per_row[row].append((name, weight))
    return per_row


def test_short_fields_are_one_prefixed_feature_with_weight_two() -> None:
    features = row_features()
    short = [item for item in features[0] if not item[0].startswith("content:")]
    assert short == [
        ("name=张三", 2.0),
        ("phone=13800138000", 2.0),
        ("filed=2015-12-14", 2.0),
        ("amount=1000", 2.0),
    ]
    # the copy writes the date and the amount differently: same features
    assert [item for item in features[2] if not item[0].startswith("content:")] == short


def test_width_case_space_and_types_are_normalised() -> None:
    features = row_features()
    smith = [item for item in features[3] if not item[0].startswith("content:")]
    assert smith == [("name=john smith", 2.0), ("filed=2016-01-02", 2.0), ("amount=250", 2.0)]
    assert [item for item in features[5] if not item[0].startswith("content:")] == smith


def test_nulls_contribute_nothing() -> None:
    assert row_features()[4] == [("name=王五", 2.0)]
    found = featurizer().features(chunk())
    assert found.filled.tolist() == [5, 4, 5, 4, 1, 4]


def test_text_is_segmented_with_term_frequencies_without_stopwords() -> None:
    text = [name for name, _ in row_features()[1] if name.startswith("content:")]
    assert "content:street" in text and "content:light" in text and "content:the" not in text
    chinese = [name for name, _ in row_features()[0] if name.startswith("content:")]
    assert "content:垃圾" in chinese and "content:城管" in chinese
    rows = [(1, "a", None, None, None, "noise noise noise water")] * 2
    repeated = row_features(rows)[0]
    assert repeated.count(("content:noise", 1.0)) == 3


def test_fingerprints_equal_the_list_api_of_the_fields_weighting() -> None:
    """The array path (encode_hashed) agrees with Fingerprinter.fingerprint_features_many."""
    reference = Fingerprinter(weighting="fields", idf="none")
    expected = reference.fingerprint_features_many(row_features())
    assert to_ints(featurizer().fingerprint_chunk(chunk())) == to_ints(expected)


@pytest.mark.parametrize("bits", [32, 128])
def test_other_widths(bits: int) -> None:
    resolved = RecordSchema("id").resolve(COLUMNS, chunk().columns)
    from neardup import FingerprintConfig

    prints = RowFeaturizer(resolved, FingerprintConfig(bits=bits)).fingerprint_chunk(chunk())
    reference = Fingerprinter(bits=bits, weighting="fields", idf="none").fingerprint_features_many(
        row_features()
    )
    assert to_ints(prints) == to_ints(reference)


def test_weights_change_fingerprints() -> None:
    plain = featurizer().fingerprint_chunk(chunk())
    heavy = featurizer(RecordSchema("id", (FieldSpec("name", weight=50.0),))).fingerprint_chunk(chunk())
    assert not np.array_equal(plain, heavy)
    # with the name dominating, the two 张三 rows and the two smiths stay identical
    assert heavy[0] == heavy[2] and heavy[3] == heavy[5]


# -- the pipeline ---------------------------------------------------------------------------------


def clusters(result: Any) -> dict[Any, Any]:
    return {row["id"]: row["cluster"] for row in result.cluster_rows()}


def test_planted_duplicates_are_found_and_others_left_alone() -> None:
    result = find_duplicate_records(COLUMNS, [chunk(ROWS[:4]), chunk(ROWS[4:], 5)], RecordSchema("id"))
    assert clusters(result) == {1: 1, 2: 2, 3: 1, 4: 4, 5: 5, 6: 4}
    assert result.distances().tolist()[2] == 0
    assert len(result.keys) == 6 and result.empty == 0 and result.skipped == 0


def test_keep_longest_picks_the_most_complete_row() -> None:
    rows = [(1, "a b", None, None, None, None), (2, "a b", "5", None, None, None)]
    result = find_duplicate_records(
        COLUMNS, [chunk(rows)], RecordSchema("id"), keep="longest", max_distance=63
    )
    assert clusters(result) == {1: 2, 2: 2}


def test_verification_rejects_pairs_that_disagree() -> None:
    # Same name, different everything else: close enough in Hamming terms at k = 63,
    # but only one column of four agrees.
    rows = [(1, "张三", "1", "2015-01-01", "5", None), (2, "张三", "2", "2016-01-01", "6", None)]
    loose = find_duplicate_records(COLUMNS, [chunk(rows)], RecordSchema("id"), max_distance=63)
    assert len(loose.pairs) == 1
    checked = find_duplicate_records(
        COLUMNS, [chunk(rows)], RecordSchema("id"), max_distance=63, check=Verification("fields")
    )
    assert len(checked.candidates) == 1 and len(checked.pairs) == 0
    assert clusters(checked) == {1: 1, 2: 2}
    jaccard_checked = find_duplicate_records(
        COLUMNS, [chunk(rows)], RecordSchema("id"), max_distance=63, check=Verification("jaccard", 0.1)
    )
    assert len(jaccard_checked.pairs) == 1  # 1 shared feature of 7: 0.14 >= 0.1


def test_similarity_functions() -> None:
    assert jaccard([1, 2, 3], [2, 3, 4]) == 0.5 and jaccard([], []) == 1.0
    a = ([0, 1, 2, 2], [10, 20, 30, 31])
    b = ([0, 1, 2], [10, 21, 30])
    # column 0 agrees (w 2), column 1 differs (w 2), text column 2 has Jaccard 1/2 (w 1)
    assert field_agreement(a, b, [2.0, 2.0, 1.0], [False, False, True]) == pytest.approx(2.5 / 5)
    assert field_agreement(([], []), ([], []), [1.0], [False]) == 1.0
    assert field_agreement(([0], [1]), ([1], [1]), [1.0, 1.0], [False, False]) == 0.0
    assert verification("none") is None and verification("jaccard").threshold == 0.5  # type: ignore[union-attr]
    with pytest.raises(ConfigError):
        Verification("fields", 1.5)


def test_feature_store_keeps_distinct_features_per_row() -> None:
    store = FeatureStore()
    feat = featurizer()
    found = feat.features(chunk())
    ids, table, _ = feat.encode(found, len(ROWS))
    store.add(found, ids, table, 0)
    store.finish(len(ROWS))
    fields, hashes = store.row(4)
    assert fields == [0] and len(hashes) == 1


def test_bad_values_in_declared_columns_fail_naming_row_key_column_and_fix() -> None:
    rows = [(1, "a", None, "2015-01-01", "5", None), (2, "b", None, "someday", "6", None)]
    schema = RecordSchema("id", (FieldSpec("filed", "date"),))
    with pytest.raises(InputError) as caught:
        find_duplicate_records(COLUMNS, [chunk(rows)], schema, source_name="table t")
    message = str(caught.value)
    assert message.startswith("table t row 2 (key 2): column 'filed' (date): not a date")
    assert "the field filed:short" in message


def test_bad_rows_can_be_skipped_and_counted() -> None:
    rows = [
        (1, "a", None, "2015-01-01", None, None),
        (2, "b", None, "someday", None, None),
        (None, "c", *[None] * 4),
    ]
    report = ErrorReport()
    schema = RecordSchema("id", (FieldSpec("filed", "date"),))
    result = find_duplicate_records(COLUMNS, [chunk(rows)], schema, on_error="skip", report=report)
    assert result.keys == [1] and result.skipped == 2 and report.count == 2
    assert "key column 'id': the key is null" in report.messages[1]


def test_inferred_number_columns_tolerate_odd_values() -> None:
    rows = [(i, "n", None, None, str(i * 10), None) for i in range(1, SAMPLE_ROWS + 2)]
    rows.append((SAMPLE_ROWS + 5, "n", None, None, "n/a", None))
    result = find_duplicate_records(COLUMNS, [chunk(rows)], RecordSchema("id"))
    assert {f.name: f.kind for f in result.schema.fields}["amount"] == "number" and len(result.keys) == len(
        rows
    )


def test_duplicate_keys_and_binary_data_are_errors() -> None:
    rows = [(1, "a", None, None, None, None), (1, "b", None, None, None, None)]
    with pytest.raises(InputError, match="duplicate key 1, first seen at row 1"):
        find_duplicate_records(COLUMNS, [chunk(rows)], RecordSchema("id"))
    rows = [(1, "a", None, None, None, b"\x00\x01"), (2, "b", None, None, None, "text here")]
    schema = RecordSchema("id", (FieldSpec("content", "text"),))
    with pytest.raises(InputError, match=r"binary data.*ignore=\['content'\]"):
        find_duplicate_records(COLUMNS, [chunk(rows)], schema)


def test_bad_settings() -> None:
    with pytest.raises(ConfigError, match="keep"):
        find_duplicate_records(COLUMNS, [chunk()], RecordSchema("id"), keep="last")
    with pytest.raises(ConfigError, match="on_error"):
        find_duplicate_records(COLUMNS, [chunk()], RecordSchema("id"), on_error="ignore")


def test_empty_source() -> None:
    result = find_duplicate_records(COLUMNS, [], RecordSchema("id", (FieldSpec("name", "short"),)))
    assert result.keys == [] and len(result.pairs) == 0 and list(result.cluster_rows()) == []


def test_resolved_field_description() -> None:
    field = ResolvedField("a", 1, "short", 2.0, False)
    assert ResolvedSchema("id", 0, (field,), ("b",)).describe() == "key id; a: short ×2; ignored: b"


def test_records_normalise_values_as_their_stored_rows_were() -> None:
    """A records index keeps its rows' normalised values, so a text value is normalised by the
    first normalizer (NFKC, case), escapes and markup left as written: a row added later is
    compared by the rules its stored matches were made by."""
    from neardup.records.compare import normalize_column

    values = ["AT&amp;T <b>Inc</b>\\n", "ＡＢＣ Ltd"]
    assert normalize_column(values, "text").tolist() == ["at&amp;t <b>inc</b>\\n", "abc ltd"]
