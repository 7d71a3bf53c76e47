"""Normalization and tokenizers."""

from __future__ import annotations

import unicodedata

import pytest

from neardup import ConfigError, InputError
from neardup.text.normalize import NORMALIZER_VERSION, Normalizer, nfkc, unescape
from neardup.text.tokenize import (
    AutoTokenizer,
    CharNgramTokenizer,
    ChineseTokenizer,
    LatinTokenizer,
    detect_language,
    read_user_dictionary,
    read_word_list,
)


@pytest.mark.parametrize(
    "text",
    [
        "１９９８年，ＡＢＣ！",
        "ﾊﾝｶｸ ｶﾀｶﾅ",
        "𝐀𝐁𝐂 ﬁ ㍿",
        "e\u0301cole",
        "plain ascii",
        "",
        "中文 text　全角空格",
    ],
)
def test_nfkc_fast_path_equals_unicodedata(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def test_normalizer_folds_width_and_case_and_keeps_whitespace_for_tokenizers() -> None:
    assert Normalizer().normalize("ＨＥＬＬＯ　Ｗｏｒｌｄ １２３") == "hello world 123"
    assert Normalizer(lowercase=False).normalize("ＡＢ") == "AB"


ESCAPED_NEWS = (
    r"<p>&nbsp;&nbsp;Showers continued throughout the week in\nthe Bahia cocoa zone,\r\n"
    r"alleviating the drought\tsince early<br/>January &amp; February.</p>\\n"
    r'<div class="x" id=y>Comissaria Smith said &#105;n its <a href="/r">weekly</a> review.</div>'
)
CLEAN_NEWS = (
    "Showers continued throughout the week in the Bahia cocoa zone, alleviating the drought "
    "since early January & February. Comissaria Smith said in its weekly review."
)


def test_escapes_entities_and_markup_written_as_text_are_separators() -> None:
    escaped, clean = Normalizer().normalize_many([ESCAPED_NEWS, CLEAN_NEWS])
    words = LatinTokenizer().tokenize_batch([escaped, clean]).token_lists()
    assert words[0] == words[1]
    assert "n" not in words[0] and "nbsp" not in words[0] and "p" not in words[0]


def test_escaped_chinese_reads_as_the_text_it_stands_for() -> None:
    text = "中央关于１９９８年工作的指导方针中突出强调要“精心部署”。这应该引起我们高度重视。"
    escaped = "<p>&nbsp;" + text.replace("。", "。\\n").replace("工作", "\\u5de5&#20316;") + "</p>"
    normalizer, tokenizer = Normalizer(), ChineseTokenizer()
    assert (
        tokenizer.tokenize_batch(normalizer.normalize_many([escaped])).word_token_lists()
        == tokenizer.tokenize_batch(normalizer.normalize_many([text])).word_token_lists()
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<IBM> and <Tandem Computers Inc> agreed", "<IBM> and <Tandem Computers Inc> agreed"),
        ("if a < b > c then AT&T's R&D", "if a < b > c then AT&T's R&D"),
        ("&unknown; &#xZZ; & amp;", "&unknown; &#xZZ; & amp;"),
        ("<A Beautiful Corp> <P&G>", "<A Beautiful Corp> <P&G>"),
        ("x&#1114112;y \\ud800z", "x y  z"),
        ("\\ud83d\\ude00 &#x1F600;", "\U0001f600 \U0001f600"),
        ("a<!-- note\nmore -->b<BR>c</SPAN>d", "a b c d"),
    ],
)
def test_only_escapes_entities_and_known_tags_are_read(text: str, expected: str) -> None:
    assert unescape(text) == expected


def test_version_1_keeps_escapes_and_markup_as_they_were() -> None:
    assert Normalizer(version=1).normalize("<p>A\\nB&amp;C</p>") == "<p>a\\nb&amp;c</p>"
    assert Normalizer().normalize("<p>A\\nB&amp;C</p>") == " a b&c "
    assert Normalizer().version == NORMALIZER_VERSION == 2
    with pytest.raises(ConfigError, match="normalizer_version"):
        Normalizer(version=3)


def test_traditional_to_simplified() -> None:
    pytest.importorskip("opencc")
    assert Normalizer(to_simplified=True).normalize("漢語書籍") == "汉语书籍"


def test_latin_tokenizer_splits_on_everything_but_letters_and_digits() -> None:
    tokens = LatinTokenizer().tokenize_batch(["hello, world-wide 3.5 café_au", "", "  x  "]).token_lists()
    assert tokens == [["hello", "world", "wide", "3", "5", "café", "au"], [], ["x"]]


def test_chinese_tokenizer_segments_words_and_keeps_latin_words_whole() -> None:
    tokens = ChineseTokenizer().tokenize_batch(["我们在北京大学读书 csdn博客"]).token_lists()[0]
    assert [token for token in tokens if token.strip()] == ["我们", "在", "北京大学", "读书", "csdn", "博客"]


def test_chinese_tagging_gives_jieba_tags() -> None:
    tagged = ChineseTokenizer().tokenize_batch(["我们在北京大学读书"], tagged=True).tagged_lists()[0]
    assert ("北京大学", "nt") in tagged and ("我们", "r") in tagged


def test_user_dictionary_changes_segmentation(tmp_path) -> None:
    dictionary = tmp_path / "user.txt"
    dictionary.write_text("# domain words\n北京大学读书 10 n\n信访件\n", encoding="utf-8")
    assert read_user_dictionary(dictionary) == [("北京大学读书", 10, "n"), ("信访件", None, None)]
    tokens = ChineseTokenizer(user_dictionary=dictionary).tokenize_batch(["我们在北京大学读书"]).token_lists()
    assert "北京大学读书" in tokens[0]
    # the default tokenizer is untouched by another instance's user words
    assert "北京大学读书" not in ChineseTokenizer().tokenize_batch(["我们在北京大学读书"]).token_lists()[0]


def test_bad_user_dictionary_line_names_the_line(tmp_path) -> None:
    dictionary = tmp_path / "user.txt"
    dictionary.write_text("好词 3 n extra\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"user.txt:1"):
        read_user_dictionary(dictionary)


def test_word_list_reader_ignores_comments_and_case(tmp_path) -> None:
    path = tmp_path / "stop.txt"
    path.write_text("# comment\nThe\n\n  of  # trailing\n", encoding="utf-8")
    assert read_word_list(path) == frozenset({"the", "of"})
    with pytest.raises(ConfigError, match="cannot read"):
        read_word_list(tmp_path / "missing.txt")


def test_char_ngrams_drop_spaces_and_punctuation_and_respect_document_boundaries() -> None:
    batch = CharNgramTokenizer(2).tokenize_batch(["ab c,d", "x", "", "中文短"])
    assert batch.token_lists() == [["ab", "bc", "cd"], ["x"], [], ["中文", "文短"]]
    with pytest.raises(ConfigError):
        CharNgramTokenizer(0)


def test_auto_language_choice_per_document() -> None:
    assert detect_language("hello world") == "en"
    assert detect_language("hello 世界") == "zh"
    tokens = AutoTokenizer().tokenize_batch(["hello world", "你好世界 hello", "bonjour café"]).token_lists()
    assert tokens[0] == ["hello", "world"]
    assert "hello" in tokens[1] and "世界" in tokens[1]
    assert tokens[2] == ["bonjour", "café"]


def test_forced_language() -> None:
    assert AutoTokenizer("en").tokenize_batch(["你好世界"]).token_lists() == [["你好世界"]]
    with pytest.raises(ConfigError, match="lang must be one of"):
        AutoTokenizer("fr")


def test_mixed_batches_keep_document_order() -> None:
    texts = ["中文一", "english one", "中文二", "", "english two"]
    tokens = AutoTokenizer().tokenize_batch(texts).token_lists()
    assert tokens[1] == ["english", "one"] and tokens[3] == [] and tokens[4] == ["english", "two"]
    assert "中文" in tokens[0] and "中文" in tokens[2]


def test_whitespace_between_chinese_characters_does_not_split_words() -> None:
    spaced, plain = (
        ChineseTokenizer()
        .tokenize_batch(["北京 大学\n读书 hello world", "北京大学读书 hello world"])
        .token_lists()
    )
    assert spaced == plain
    assert "北京大学" in plain and "hello" in plain and "world" in plain


@pytest.mark.parametrize("hmm", [False, True])
def test_tagging_and_cutting_agree_on_the_words(hmm: bool) -> None:
    text = "韩冰是一个好人，他在北京大学读书"  # 韩冰 is found only by HMM
    tokenizer = ChineseTokenizer(hmm=hmm)
    cut = tokenizer.tokenize_batch([text]).token_lists()[0]
    tagged = [token for token, _ in tokenizer.tokenize_batch([text], tagged=True).tagged_lists()[0]]
    assert cut == tagged
    assert ("韩冰" in cut) is hmm
