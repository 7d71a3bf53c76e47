"""Pinned fingerprints of fixed texts for every hash and weighting: any change to
normalization, tokenization, weighting, hashing or the Simhash fold shows up here.

If a change is intended, regenerate the table, add a NORMALIZER_VERSION when normalization
changed (or a setting whose recorded absence means the old behaviour, as ``term_frequency``
and ``max_share``), and say so in the change note. ``GOLDEN_BEFORE`` is the table of b10d33e,
before issue 32's saturating weights (log term frequency, share cap 0.1): the settings an
index of that time records (:data:`LEGACY`) must still give it, or its stored fingerprints
would no longer match.
"""

from __future__ import annotations

import pytest

from neardup import Fingerprinter, to_hex
from neardup.fingerprint.config import FingerprintConfig

TEXTS = {
    "zh": "中央关于１９９８年工作的指导方针中突出强调要“精心部署”，这应该引起我们高度重视。",
    "en": "Showers continued throughout the week in the Bahia cocoa zone, "
    "alleviating the drought since early January.",
    "mixed": "我们在北京大学读书，CSDN博客 hello world, 总之 Simhash works.",
}
TITLES = {"zh": "精心部署", "en": "BAHIA COCOA REVIEW", "mixed": "北京大学"}

GOLDEN_BEFORE = {
    ("city64", "tf", "zh"): "04b078d88b478d70",
    ("city64", "tf", "en"): "f6063c1c03120125",
    ("city64", "tf", "mixed"): "ee8a4641471e8caf",
    ("city64", "tfidf", "zh"): "3d18295907479970",
    ("city64", "tfidf", "en"): "f6063c1c03120125",
    ("city64", "tfidf", "mixed"): "ee8a4641471e8caf",
    ("city64", "tfidf-len", "zh"): "bd1829680747b970",
    ("city64", "tfidf-len", "en"): "f62f3c3c03162925",
    ("city64", "tfidf-len", "mixed"): "ee8a4643471e8caf",
    ("city64", "composite", "zh"): "3c58301d8b07cd74",
    ("city64", "composite", "en"): "fe0db85d110e636d",
    ("city64", "composite", "mixed"): "deeb57c346948e95",
    ("farm64", "tf", "zh"): "04b078d88b478d70",
    ("farm64", "tf", "en"): "f6063c1c03120125",
    ("farm64", "tf", "mixed"): "ee8a4641471e8caf",
    ("farm64", "tfidf", "zh"): "3d18295907479970",
    ("farm64", "tfidf", "en"): "f6063c1c03120125",
    ("farm64", "tfidf", "mixed"): "ee8a4641471e8caf",
    ("farm64", "tfidf-len", "zh"): "bd1829680747b970",
    ("farm64", "tfidf-len", "en"): "f62f3c3c03162925",
    ("farm64", "tfidf-len", "mixed"): "ee8a4643471e8caf",
    ("farm64", "composite", "zh"): "3c58301d8b07cd74",
    ("farm64", "composite", "en"): "fe0db85d110e636d",
    ("farm64", "composite", "mixed"): "deeb57c346948e95",
    ("murmur3_64", "tf", "zh"): "a49542877af92e3a",
    ("murmur3_64", "tf", "en"): "a9a05030016ce2d5",
    ("murmur3_64", "tf", "mixed"): "4f83f1bbc4dca67d",
    ("murmur3_64", "tfidf", "zh"): "ac97408472d92e1a",
    ("murmur3_64", "tfidf", "en"): "a9a05030016ce2d5",
    ("murmur3_64", "tfidf", "mixed"): "4f83f1bac4dca67d",
    ("murmur3_64", "tfidf-len", "zh"): "ac9f408660db2e1a",
    ("murmur3_64", "tfidf-len", "en"): "a9a05c30416efad5",
    ("murmur3_64", "tfidf-len", "mixed"): "4f81f1bac4fe2679",
    ("murmur3_64", "composite", "zh"): "e65f42b4fce92f2a",
    ("murmur3_64", "composite", "en"): "b8b279708168f2f5",
    ("murmur3_64", "composite", "mixed"): "cfa3b5bb847e231d",
    ("xxh3_64", "tf", "zh"): "697ee1394f437664",
    ("xxh3_64", "tf", "en"): "34b923729065c124",
    ("xxh3_64", "tf", "mixed"): "9365687d907c5d26",
    ("xxh3_64", "tfidf", "zh"): "617e61394f453765",
    ("xxh3_64", "tfidf", "en"): "34b923729065c124",
    ("xxh3_64", "tfidf", "mixed"): "9365687d907c7d26",
    ("xxh3_64", "tfidf-len", "zh"): "617e61194f453365",
    ("xxh3_64", "tfidf-len", "en"): "b4f92b739167f1a4",
    ("xxh3_64", "tfidf-len", "mixed"): "93656c75947c7d26",
    ("xxh3_64", "composite", "zh"): "f95ec2114dc2b045",
    ("xxh3_64", "composite", "en"): "30b92b739c31d104",
    ("xxh3_64", "composite", "mixed"): "db4d74359468576c",
    ("bkdr64", "tf", "zh"): "00000805b69cce0e",
    ("bkdr64", "tf", "en"): "0000000250462d31",
    ("bkdr64", "tf", "mixed"): "0000000a1d577506",
    ("bkdr64", "tfidf", "zh"): "00000805b69ece0e",
    ("bkdr64", "tfidf", "en"): "0000000250462d31",
    ("bkdr64", "tfidf", "mixed"): "0000000a1d577786",
    ("bkdr64", "tfidf-len", "zh"): "00000805b69fcc0e",
    ("bkdr64", "tfidf-len", "en"): "00000006d0462d31",
    ("bkdr64", "tfidf-len", "mixed"): "0000000a3f577786",
    ("bkdr64", "composite", "zh"): "00000835f29ecb4e",
    ("bkdr64", "composite", "en"): "00000006d05e2db1",
    ("bkdr64", "composite", "mixed"): "0000000a07563d04",
    ("java", "tf", "zh"): "23b4e0d9d96d056b",
    ("java", "tf", "en"): "82056243ec7caa58",
    ("java", "tf", "mixed"): "01e2542aa1069e3c",
    ("java", "tfidf", "zh"): "23b4f099d91d056b",
    ("java", "tfidf", "en"): "82056243ec7caa58",
    ("java", "tfidf", "mixed"): "01e2142aa1069e3c",
    ("java", "tfidf-len", "zh"): "23b6f099f91d05eb",
    ("java", "tfidf-len", "en"): "8a156a43fc7caa5a",
    ("java", "tfidf-len", "mixed"): "01e2146aa9069e3c",
    ("java", "composite", "zh"): "29fdecad596f0f6b",
    ("java", "composite", "en"): "8b3d6f61fc6cba58",
    ("java", "composite", "mixed"): "01e254eaa907debe",
    ("md5_64", "tf", "zh"): "11ca14f5fb0936ae",
    ("md5_64", "tf", "en"): "42a953ed04497288",
    ("md5_64", "tf", "mixed"): "32a24a2a66225117",
    ("md5_64", "tfidf", "zh"): "50c21675fbc836ef",
    ("md5_64", "tfidf", "en"): "42a953ed04497288",
    ("md5_64", "tfidf", "mixed"): "32a24a286622511f",
    ("md5_64", "tfidf-len", "zh"): "51c016f5fbcc3eef",
    ("md5_64", "tfidf-len", "en"): "46f953fd0549728a",
    ("md5_64", "tfidf-len", "mixed"): "32205a286622711f",
    ("md5_64", "composite", "zh"): "18189657c90d36ae",
    ("md5_64", "composite", "en"): "c2b953ed344dd2d8",
    ("md5_64", "composite", "mixed"): "f288132e4c206355",
    ("blake2b_64", "tf", "zh"): "f6c4eb7cb6d06aac",
    ("blake2b_64", "tf", "en"): "584099302818139b",
    ("blake2b_64", "tf", "mixed"): "1e7525a5f9a17196",
    ("blake2b_64", "tfidf", "zh"): "f6c5eb7cb6d06a8c",
    ("blake2b_64", "tfidf", "en"): "584099302818139b",
    ("blake2b_64", "tfidf", "mixed"): "1e7525a5f9a17196",
    ("blake2b_64", "tfidf-len", "zh"): "f2c4eb7c96d268ac",
    ("blake2b_64", "tfidf-len", "en"): "f9409938a8b8d39b",
    ("blake2b_64", "tfidf-len", "mixed"): "1f7725a7f9c17196",
    ("blake2b_64", "composite", "zh"): "b8d5eb20b6d06088",
    ("blake2b_64", "composite", "en"): "905099b6a91853d9",
    ("blake2b_64", "composite", "mixed"): "9e7425b799e372b2",
    ("city64-32", "tfidf-len", "zh"): "0747b970",
    ("city64-32", "tfidf-len", "en"): "03162925",
    ("city64-32", "tfidf-len", "mixed"): "471e8caf",
    ("city64-128", "tfidf-len", "zh"): "3f57d22eb7867c7de83892e7d3b32139",
    ("city64-128", "tfidf-len", "en"): "07f79d15f4ffe647535cb76dafc10452",
    ("city64-128", "tfidf-len", "mixed"): "bf737ccc84f4ef6caf1cde00da477f72",
}


#: Today's defaults.
GOLDEN = {
    ("city64", "tf", "zh"): "04b078d88b478d70",
    ("city64", "tf", "en"): "f6063c1c03120125",
    ("city64", "tf", "mixed"): "ee8a4641471e8caf",
    ("city64", "tfidf", "zh"): "2c1029590b47ad70",
    ("city64", "tfidf", "en"): "f6063c1c03120125",
    ("city64", "tfidf", "mixed"): "ee8a4641471e8caf",
    ("city64", "tfidf-len", "zh"): "3c1029790347a970",
    ("city64", "tfidf-len", "en"): "f62f3c3c03162925",
    ("city64", "tfidf-len", "mixed"): "ee8a4641471e8caf",
    ("city64", "composite", "zh"): "3c1820288b07ad74",
    ("city64", "composite", "en"): "f60fbc5d011e6365",
    ("city64", "composite", "mixed"): "ee8a4643471e8caf",
    ("farm64", "tf", "zh"): "04b078d88b478d70",
    ("farm64", "tf", "en"): "f6063c1c03120125",
    ("farm64", "tf", "mixed"): "ee8a4641471e8caf",
    ("farm64", "tfidf", "zh"): "2c1029590b47ad70",
    ("farm64", "tfidf", "en"): "f6063c1c03120125",
    ("farm64", "tfidf", "mixed"): "ee8a4641471e8caf",
    ("farm64", "tfidf-len", "zh"): "3c1029790347a970",
    ("farm64", "tfidf-len", "en"): "f62f3c3c03162925",
    ("farm64", "tfidf-len", "mixed"): "ee8a4641471e8caf",
    ("farm64", "composite", "zh"): "3c1820288b07ad74",
    ("farm64", "composite", "en"): "f60fbc5d011e6365",
    ("farm64", "composite", "mixed"): "ee8a4643471e8caf",
    ("murmur3_64", "tf", "zh"): "a49542877af92e3a",
    ("murmur3_64", "tf", "en"): "a9a05030016ce2d5",
    ("murmur3_64", "tf", "mixed"): "4f83f1bbc4dca67d",
    ("murmur3_64", "tfidf", "zh"): "ac9742867af92e1a",
    ("murmur3_64", "tfidf", "en"): "a9a05030016ce2d5",
    ("murmur3_64", "tfidf", "mixed"): "4f83f1bbc4dca67d",
    ("murmur3_64", "tfidf-len", "zh"): "ac9742866ad92e1a",
    ("murmur3_64", "tfidf-len", "en"): "a9a05c30416efad5",
    ("murmur3_64", "tfidf-len", "mixed"): "4f83f1bbc4dca67d",
    ("murmur3_64", "composite", "zh"): "eedf42a66ce92f3a",
    ("murmur3_64", "composite", "en"): "b9b27970016cf2f5",
    ("murmur3_64", "composite", "mixed"): "4f83f1bac4fe267d",
    ("xxh3_64", "tf", "zh"): "697ee1394f437664",
    ("xxh3_64", "tf", "en"): "34b923729065c124",
    ("xxh3_64", "tf", "mixed"): "9365687d907c5d26",
    ("xxh3_64", "tfidf", "zh"): "617e61394f473665",
    ("xxh3_64", "tfidf", "en"): "34b923729065c124",
    ("xxh3_64", "tfidf", "mixed"): "9365687d907c5d26",
    ("xxh3_64", "tfidf-len", "zh"): "617e61314f453665",
    ("xxh3_64", "tfidf-len", "en"): "b4f92b739167f1a4",
    ("xxh3_64", "tfidf-len", "mixed"): "9365687d907c5d26",
    ("xxh3_64", "composite", "zh"): "615ec2114f42b24d",
    ("xxh3_64", "composite", "en"): "30b92b739c75d124",
    ("xxh3_64", "composite", "mixed"): "93656c75947c7d26",
    ("bkdr64", "tf", "zh"): "00000805b69cce0e",
    ("bkdr64", "tf", "en"): "0000000250462d31",
    ("bkdr64", "tf", "mixed"): "0000000a1d577506",
    ("bkdr64", "tfidf", "zh"): "00000805b69ece0e",
    ("bkdr64", "tfidf", "en"): "0000000250462d31",
    ("bkdr64", "tfidf", "mixed"): "0000000a1d577506",
    ("bkdr64", "tfidf-len", "zh"): "00000805b69ece0e",
    ("bkdr64", "tfidf-len", "en"): "00000006d0462d31",
    ("bkdr64", "tfidf-len", "mixed"): "0000000a1d577506",
    ("bkdr64", "composite", "zh"): "00000815f69ece0e",
    ("bkdr64", "composite", "en"): "00000006d05e2db1",
    ("bkdr64", "composite", "mixed"): "0000000a1f577786",
    ("java", "tf", "zh"): "23b4e0d9d96d056b",
    ("java", "tf", "en"): "82056243ec7caa58",
    ("java", "tf", "mixed"): "01e2542aa1069e3c",
    ("java", "tfidf", "zh"): "23b4e099d96d056b",
    ("java", "tfidf", "en"): "82056243ec7caa58",
    ("java", "tfidf", "mixed"): "01e2542aa1069e3c",
    ("java", "tfidf-len", "zh"): "23b4e099d92d05eb",
    ("java", "tfidf-len", "en"): "8a156a43fc7caa5a",
    ("java", "tfidf-len", "mixed"): "01e2542aa1069e3c",
    ("java", "composite", "zh"): "23fde48d597f0feb",
    ("java", "composite", "en"): "8b156f63fc7cba58",
    ("java", "composite", "mixed"): "01e2146aa9069e3c",
    ("md5_64", "tf", "zh"): "11ca14f5fb0936ae",
    ("md5_64", "tf", "en"): "42a953ed04497288",
    ("md5_64", "tf", "mixed"): "32a24a2a66225117",
    ("md5_64", "tfidf", "zh"): "11ca16f5fb0936af",
    ("md5_64", "tfidf", "en"): "42a953ed04497288",
    ("md5_64", "tfidf", "mixed"): "32a24a2a66225117",
    ("md5_64", "tfidf-len", "zh"): "11ca16f5fb093eaf",
    ("md5_64", "tfidf-len", "en"): "46f953fd0549728a",
    ("md5_64", "tfidf-len", "mixed"): "32a24a2a66225117",
    ("md5_64", "composite", "zh"): "11581657c90d3eae",
    ("md5_64", "composite", "en"): "c2b953ed2449d2d8",
    ("md5_64", "composite", "mixed"): "32a05a286622711f",
    ("blake2b_64", "tf", "zh"): "f6c4eb7cb6d06aac",
    ("blake2b_64", "tf", "en"): "584099302818139b",
    ("blake2b_64", "tf", "mixed"): "1e7525a5f9a17196",
    ("blake2b_64", "tfidf", "zh"): "f6c4eb7cb6d06aac",
    ("blake2b_64", "tfidf", "en"): "584099302818139b",
    ("blake2b_64", "tfidf", "mixed"): "1e7525a5f9a17196",
    ("blake2b_64", "tfidf-len", "zh"): "f6c5eb7cb6d06aac",
    ("blake2b_64", "tfidf-len", "en"): "f9409938a8b8d39b",
    ("blake2b_64", "tfidf-len", "mixed"): "1e7525a5f9a17196",
    ("blake2b_64", "composite", "zh"): "bac4eb68b6d260ac",
    ("blake2b_64", "composite", "en"): "d85099b6a918539b",
    ("blake2b_64", "composite", "mixed"): "1e7525a7f9e17196",
    ("city64-32", "tfidf-len", "zh"): "0347a970",
    ("city64-32", "tfidf-len", "en"): "03162925",
    ("city64-32", "tfidf-len", "mixed"): "471e8caf",
    ("city64-128", "tfidf-len", "zh"): "3757922f37867c7fe9989267d3bb2139",
    ("city64-128", "tfidf-len", "en"): "07f79d15f4ffe647535cb76dafc10452",
    ("city64-128", "tfidf-len", "mixed"): "fe737ccc8cf4ef6eaf1cdf04da4b7f32",
}

#: What an index made before issue 32 records: raw term frequencies, no cap, normalizer 1.
LEGACY = {"term_frequency": "raw", "max_share": 1.0, "normalizer_version": 1}


@pytest.mark.parametrize("case", sorted(GOLDEN), ids=lambda case: "-".join(case))
def test_golden_fingerprint(case: tuple[str, str, str]) -> None:
    assert _fingerprint(case, {}) == GOLDEN[case]


@pytest.mark.parametrize("case", sorted(GOLDEN_BEFORE), ids=lambda case: "-".join(case))
def test_the_settings_of_before_give_the_fingerprints_of_before(case: tuple[str, str, str]) -> None:
    assert _fingerprint(case, LEGACY) == GOLDEN_BEFORE[case]


def _fingerprint(case: tuple[str, str, str], settings: dict[str, object]) -> str:
    hash_name, weighting, text = case
    bits = 64
    if "-" in hash_name:
        hash_name, width = hash_name.split("-")
        bits = int(width)
    fingerprinter = _fingerprinter(bits, weighting, hash_name, tuple(sorted(settings.items())))
    return to_hex(fingerprinter.fingerprint(TEXTS[text], TITLES[text]), bits)


_CACHE: dict[tuple[object, ...], Fingerprinter] = {}


def _fingerprinter(
    bits: int, weighting: str, hash_name: str, settings: tuple[tuple[str, object], ...]
) -> Fingerprinter:
    key = (bits, weighting, hash_name, settings)
    if key not in _CACHE:
        config = FingerprintConfig(bits=bits, weighting=weighting, hash=hash_name, **dict(settings))
        _CACHE[key] = Fingerprinter(config=config)
    return _CACHE[key]
