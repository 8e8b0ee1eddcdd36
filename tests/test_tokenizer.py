"""The tokenizer: Unicode words, normalisation, lengths, stop words, URLs, n-grams."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nbspam.core.settings import TokenizerConfig
from nbspam.errors import ConfigError
from nbspam.text import tokenizer as tokenizer_module
from nbspam.text.tokenizer import (
    _ASCII_ADDRESS_RE,
    _ASCII_WORD2_RE,
    _ASCII_WORD_RE,
    _UNICODE,
    Tokenizer,
    load_stop_words,
)


def words(text: str, **settings) -> list[str]:
    return Tokenizer(TokenizerConfig(**settings)).words(text)


def test_words_of_any_script_are_case_folded():
    assert words("Hello WORLD Straße Ελλάδα Москва café 2024") == [
        "hello",
        "world",
        "strasse",
        "ελλάδα",
        "москва",
        "café",
        "2024",
    ]


def test_nfkc_normalisation_and_its_switches():
    assert words("ＦＵＬＬ ﬁne") == ["full", "fine"]
    assert words("ＦＵＬＬ", normalize=False) == ["ｆｕｌｌ"]
    assert words("MiXed", casefold=False) == ["MiXed"]


def test_urls_and_addresses_are_kept_whole():
    text = "See https://Example.com/a?b=1, or www.example.org. Mail Bob.Smith@Example.COM."
    # addresses come after the words
    assert words(text) == [
        "see",
        "or",
        "mail",
        "https://example.com/a?b=1",
        "www.example.org",
        "bob.smith@example.com",
    ]
    assert words("mailto:a@b.example and http://x.example/a@b") == [
        "mailto",
        "and",
        "a@b.example",
        "http://x.example/a@b",
    ]


def test_inner_punctuation_joins_and_currency_stays():
    assert words("don't e-mail $100 3.5% user_id end.") == [
        "don't",
        "e-mail",
        "$100",
        "3.5",
        "user_id",
        "end",
    ]


def test_lengths_and_skip_tokens():
    long = "a" * 45
    assert words(f"a an the {long}", min_length=2) == ["an", "the", "skip:a 40"]
    assert words(f"a {long}", min_length=1, long_words="drop") == ["a"]
    assert words("abcdef", max_length=5) == ["skip:a 0"]


def test_cjk_runs_become_bigrams():
    assert words("東京都に行く") == ["東京", "京都", "都に", "に行", "行く"]
    assert words("猫") == ["猫"]


def test_ngrams_follow_stop_word_removal():
    cfg = TokenizerConfig(ngrams=3, stop_words=("the",))
    assert Tokenizer(cfg).words("the quick brown fox") == [
        "quick",
        "brown",
        "fox",
        "quick brown",
        "brown fox",
        "quick brown fox",
    ]


def test_stop_words_are_normalised_like_text(tmp_path):
    f = tmp_path / "stop.txt"
    f.write_text("# my list\nTHE\nＦＯＯ  # fullwidth\n\nstraße\n", encoding="utf-8")
    cfg = TokenizerConfig()
    stop = load_stop_words(str(f), cfg)
    assert stop == ("foo", "strasse", "the")
    assert Tokenizer(cfg.replace(stop_words=stop)).words("The foo STRASSE bar") == ["bar"]


def test_builtin_english_list_and_none():
    english = load_stop_words("english", TokenizerConfig())
    assert {"the", "and", "don't", "yourselves"} <= set(english)
    assert "free" not in english
    assert load_stop_words("none", TokenizerConfig()) == ()


def test_unreadable_stop_word_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read stop-word file .*missing.txt"):
        load_stop_words(str(tmp_path / "missing.txt"), TokenizerConfig())


def test_deterministic_across_processes():
    """The same tokens in the same order whatever the hash seed of the process."""
    import subprocess
    import sys

    probe = (
        "from nbspam.text.features import Analyzer\n"
        "from nbspam.core.settings import TokenizerConfig\n"
        "text = open(__import__('sys').argv[1], 'rb').read()\n"
        "print(Analyzer(TokenizerConfig(ngrams=2)).tokens(text))\n"
    )
    sample = Path(__file__).resolve().parents[1] / "sample_data" / "train" / "spam" / "005.eml"
    runs = {
        subprocess.run(
            [sys.executable, "-c", probe, str(sample)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(runs) == 1 and len(runs.pop()) > 100


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.characters(max_codepoint=127),
            st.sampled_from(["@", "://", "www.", "http", ".com", "a.b", "x-y", "$", "$$1", "$.5"]),
        ),
        max_size=40,
    ).map("".join)
)
def test_the_ascii_patterns_match_the_unicode_ones_on_ascii(text):
    assert _ASCII_WORD_RE.findall(text) == _UNICODE.word.findall(text)
    assert [m.span() for m in _ASCII_ADDRESS_RE.finditer(text)] == [
        m.span() for m in _UNICODE.address.finditer(text)
    ]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.characters(max_codepoint=127),
            st.sampled_from(["a", "Z", "9", "$1", "a.", ".b", "a-b", "a'b'c", "$$1", "x__y", "1."]),
        ),
        max_size=40,
    ).map("".join)
)
@example("a b.c d-e $1 $ x. .y z")
def test_the_two_character_word_pattern_is_the_word_pattern_less_one_character_words(text):
    assert _ASCII_WORD2_RE.findall(text) == [w for w in _ASCII_WORD_RE.findall(text) if len(w) > 1]


def test_ascii_text_is_tokenized_without_importing_regex():
    probe = (
        "import sys\n"
        "from nbspam.core.settings import TokenizerConfig\n"
        "from nbspam.text.tokenizer import Tokenizer\n"
        "words = Tokenizer(TokenizerConfig()).words('Mail bob@example.com, see www.x.org now')\n"
        "assert 'regex' not in sys.modules, 'regex imported'\n"
        "Tokenizer(TokenizerConfig()).words('Grüße aus Köln')\n"
        "print(words, 'regex' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['mail', 'see', 'now', 'bob@example.com', 'www.x.org'] True"


def test_split_gives_the_addresses_apart():
    tokenizer = Tokenizer(TokenizerConfig())
    text = "Mail bob@example.com or see https://example.org/x now"
    words_, addresses = tokenizer.split(text)
    assert addresses == ["bob@example.com", "https://example.org/x"]
    assert words_ + addresses == tokenizer.words(text)


_PIECES = st.sampled_from(
    [
        " ",
        "\n",
        "\t",
        "\r",
        "\v",
        "\x1c",
        "\x85",
        "\u2028",
        "é",
        "Ä",
        "東京",
        "$",
        "€",
        "a",
        "Z",
        "9",
        "it's",
        "x-y",
        "a.b",
        "@",
        "://",
        "www.",
        "http",
        "https://",
        ".com",
        "<",
        "ab",
        "ﬁ",
        "themselves",
        "Übung",
    ]
)


_CONFIGS = st.builds(
    TokenizerConfig,
    min_length=st.sampled_from([1, 2, 3]),
    max_length=st.sampled_from([4, 8, 30]),
    long_words=st.sampled_from(["skip", "drop"]),
    stop_words=st.sampled_from([(), ("it's", "themselves")]),
    ngrams=st.sampled_from([1, 2]),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join), _CONFIGS)
@example("é https://x\x1cyz", TokenizerConfig())  # str.split() splits there; a URL does not
@example("café au lait", TokenizerConfig(ngrams=2))  # n-grams need the text's order
@example("café themselves", TokenizerConfig(max_length=8, stop_words=("themselves",)))
def test_tokens_out_of_order_are_those_in_order(text, config):
    tokenizer = Tokenizer(config)
    words_, addresses = tokenizer.split(text, in_order=False)
    in_order = tokenizer.split(text)
    assert sorted(words_) == sorted(in_order[0])
    assert sorted(addresses) == sorted(in_order[1])


def _general_words(text: str, config: TokenizerConfig) -> list[str]:
    """The tokens of an ASCII text by the general rule, word by word in text order: the
    Unicode pattern's words, those of a kept length and no stop word, long ones as skip
    tokens, then the n-grams and word pairs, then the addresses."""
    from nbspam.text.tokenizer import _ngrams, _take_addresses, pair_tokens

    text = text.lower() if config.casefold else text
    rest, addresses = (
        _take_addresses(text) if "@" in text or "://" in text or "www." in text else (text, [])
    )
    out = []
    for word in _UNICODE.word.findall(rest):
        if word in config.stop_words or len(word) < config.min_length:
            continue
        if len(word) <= config.max_length:
            out.append(word)
        elif config.long_words == "skip":
            out.append(f"skip:{word[0]} {len(word) // 10 * 10}")
    if config.ngrams > 1:
        out.extend(_ngrams(out, config.ngrams))
    if config.word_pairs == "all":
        out.extend(pair_tokens(out, config.pair_buckets))
    return out + addresses


@settings(max_examples=500, deadline=None)
@given(
    st.lists(_PIECES.filter(str.isascii), max_size=30).map("".join),
    _CONFIGS,
    st.sampled_from(["none", "all"]),
)
@example("a bc d e.f $ $5 it's", TokenizerConfig(), "all")
@example("a bc themselves it's", TokenizerConfig(stop_words=("it's",), ngrams=2), "all")
def test_ascii_text_gives_the_tokens_of_the_general_rule(text, config, word_pairs):
    """ASCII text is scanned by quicker patterns (of two characters or more where shorter
    words are dropped) and filtered without a loop where it can: the same tokens in the same
    order as the word-by-word rule, with n-grams and word pairs."""
    config = config.replace(word_pairs=word_pairs, pair_buckets=97)
    tokens, expected = Tokenizer(config).words(text), _general_words(text, config)
    if config.ngrams == 1 and word_pairs == "none":  # then the skip tokens may come last
        tokens, expected = sorted(tokens), sorted(expected)
    assert tokens == expected


def test_a_long_stop_word_is_dropped_as_any_stop_word():
    settings = {"max_length": 8, "stop_words": ("themselves",)}
    assert words("Themselves rule", **settings) == ["rule"]
    assert words("Übung themselves rule", **settings) == ["übung", "rule"]
    assert words("Themselves rule", max_length=8) == ["rule", "skip:t 10"]


def _take_chunk_by_chunk(text: str) -> tuple[str, list[str]]:
    """`_take_addresses` as it documents itself: each chunk between the blanks " \\n\\t\\r"
    that holds a mark is searched on its own, and each address found becomes one blank."""
    pattern = _ASCII_ADDRESS_RE if text.isascii() else _UNICODE.address
    spans = []
    for chunk in re.finditer("[^ \n\t\r]+", text):
        if any(mark in chunk.group() for mark in ("@", "://", "www.")):
            spans += [m.span() for m in pattern.finditer(text, *chunk.span())]
    ends = [0] + [end for _, end in spans]
    starts = [start for start, _ in spans] + [len(text)]
    found = [text[start:end] for start, end in spans]
    return " ".join(text[a:b] for a, b in zip(ends, starts)), [
        m.rstrip(".") if "@" in m and "/" not in m else m.rstrip(".,;:!?)'\"*") for m in found
    ]


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
@example("a@a.com\rwww.a.com")  # a carriage return ends a chunk too
def test_addresses_are_searched_chunk_by_chunk(text):
    assert tokenizer_module._take_addresses(text) == _take_chunk_by_chunk(text)


# Hostile text, tokenized by `Analyzer.tokens` in a process of its own that must finish within
# HANG_LIMIT seconds (a hang guard: the old code took from minutes to hours on each).
HANG_LIMIT = 10
HOSTILE = {
    # e-mail address patterns tried from every position of a long run of address characters
    # (a body shorter than max_body_chars, 200,000 characters, so that its "@" is read)
    "address-local-part": 'b"Subject: hi\\n\\n" + b"a" * 150_000 + b"@"',
    "address-domain": 'b"Subject: hi\\n\\na@" + b"b" * 1_000_000',
    "address-in-from": 'b"From: " + b"a" * 1_000_000 + b"@b\\n\\nhi"',
    "address-unicode": '"Subject: hi\\n\\n".encode() + ("\\u00e9" * 150_000 + "@").encode()',
    # NFKC sorting long runs of combining marks of two classes
    "mark-run": '("Subject: x\\n\\na" + "\\u0301" * 100_000 + "\\u0316" * 100_000).encode()',
    "halfwidth-sound-marks": '("Subject: x\\n\\na" + "\\u0301\\uff9e" * 100_000).encode()',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_text_is_tokenized_in_bounded_time(case):
    probe = (
        "from nbspam.core.settings import TokenizerConfig\n"
        "from nbspam.text.features import Analyzer\n"
        f"print(len(Analyzer(TokenizerConfig()).tokens({HOSTILE[case]})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        timeout=HANG_LIMIT,
    )
    assert int(out.stdout) > 0


def test_addresses_are_found_where_runs_of_their_characters_start():
    assert words("Mail a.b+c@x-y.example.org, ann@b.example. or é.ü@bü.de now") == [
        "mail",
        "or",
        "now",
        "a.b+c@x-y.example.org",
        "ann@b.example",
        "é.ü@bü.de",
    ]
    assert words("x" * 50 + "@") == ["skip:x 50"]  # no address: one long word
    assert words("a@" + "b" * 50) == ["skip:b 50"]
    # An address cannot start inside a run of local-part characters, even where another
    # address has just ended: the tail "._x@y.example" of the first is words, not an address.
    assert words("a@b.example._x@y.example") == ["y.example", "a@b.example"]


def test_long_runs_of_combining_marks_are_cut():
    marks = "\u0316" * 40 + "\u0301" * 40  # classes 220 then 230: in canonical order
    assert tokenizer_module.cut_mark_runs("x" + marks + " y") == "x" + "\u0316" * 30 + " y"
    assert tokenizer_module.cut_mark_runs("x" + "\u0301" * 30) == "x" + "\u0301" * 30
    for start in range(40):  # a run of 31 wherever it starts
        text = "x" * start + "\u0301" * 31 + "yz"
        assert tokenizer_module.cut_mark_runs(text) == "x" * start + "\u0301" * 30 + "yz"
    assert words("Zalgo" + marks + " ok", max_length=100) == ["zalgo" + "\u0316" * 30, "ok"]
    assert words("Zalgo" + marks + " ok") == ["skip:z 30", "ok"]
    assert words("e\u0301t\u00e9 \u0915\u094d\u0937") == ["\u00e9t\u00e9", "\u0915\u094d\u0937"]


def test_halfwidth_sound_marks_normalise_as_before():
    assert tokenizer_module.cut_mark_runs("\uff76\uff9e\uff8a\uff9f") == "\uff76\u3099\uff8a\u309a"
    assert words("\uff76\uff9e\uff8a\uff9f") == ["\u30ac\u30d1"]  # ガパ


def test_only_marks_and_the_halfwidth_sound_marks_decompose_to_a_mark_first():
    """What `cut_mark_runs` relies on: any other character begins its NFKC decomposition
    with a character of combining class 0, which a canonical-ordering run cannot cross."""
    is_mark = regex.compile(r"\p{M}").match
    lead_marks = {
        code
        for code in range(0x110000)
        if (unicodedata.decomposition(chr(code)) or unicodedata.combining(chr(code)))
        and unicodedata.combining(unicodedata.normalize("NFKD", chr(code))[0])
        and not is_mark(chr(code))
    }
    assert lead_marks == {0xFF9E, 0xFF9F}


def test_normalised_text_is_cut_at_max_body_chars():
    # U+FDFA is one character that NFKC makes 18: the words of its first 36 characters
    assert words("\ufdfa" * 1000, max_body_chars=36) == [
        "صلى",
        "الله",
        "عليه",
        "وسلمصلى",
        "الله",
        "عليه",
        "وسلم",
    ]
    assert words("abc " * 100, max_body_chars=10) == ["abc", "abc", "ab"]


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join), _CONFIGS)
def test_text_without_cjk_gives_the_words_text_with_cjk_gives(text, config):
    """A text without Han, kana or long words is filtered in one pass: the same words in
    the same order as the word-by-word loop that text with CJK goes through."""
    config = config.replace(ngrams=1)
    text = "é " + text.replace("東京", " ")
    tokenizer = Tokenizer(config)
    assert tokenizer.split(text + " 猫")[0] == [*tokenizer.split(text)[0], "猫"]


@pytest.mark.corpus
@pytest.mark.parametrize(
    "word_pairs, count, sha256",
    [
        ("none", 124_645, "567e49160dfa57c1961eb62c36727a0f92ce58e89b832643406b2ab4b583bbe0"),
        # the default: the same words, and the pairs of the subject and headers
        ("headers", 144_035, "77b6295cba7063e15118b8fd24576477c25f67ff61571738e565a39c57dfff0c"),
    ],
)
def test_the_tokens_of_real_mail_stay_the_same(spamassassin, word_pairs, count, sha256):
    """The tokens of 303 SpamAssassin messages (every 20th by path), in order, with the
    default settings and single words: a change to the tokenizer that makes it quicker
    must keep them."""
    import hashlib

    from nbspam.core.settings import build_settings
    from nbspam.text.features import Analyzer

    paths = sorted(p for p in spamassassin.glob("*/*") if p.parent.name in ("ham", "spam"))
    analyzer = Analyzer(build_settings({"word_pairs": word_pairs}).tokenizer)
    digest, counted = hashlib.sha256(), 0
    for path in paths[::20]:
        tokens = analyzer.tokens(path.read_bytes())
        counted += len(tokens)
        digest.update("\n".join(tokens).encode("utf-8", "surrogatepass") + b"\0")
    assert (len(paths[::20]), counted) == (303, count)
    assert digest.hexdigest() == sha256


def test_word_pairs_hash_each_two_words_in_a_row_and_skip_long_words_and_ngrams():
    import zlib

    from nbspam.text.tokenizer import pair_tokens

    def pair(a: str, b: str, buckets: int) -> str:  # the CRC-32 of each word, combined
        return f"pair:{(zlib.crc32(a.encode()) * 0x9E3779B1 ^ zlib.crc32(b.encode())) % buckets}"

    assert pair_tokens(["cheap", "meds", "now"], 1 << 20) == [
        pair("cheap", "meds", 1 << 20),
        pair("meds", "now", 1 << 20),
    ]
    # skip: tokens and n-grams are no words of a pair: their neighbours pair up
    words = ["cheap", "skip:x 30", "meds", "cheap meds", "now"]
    assert pair_tokens(words, 7) == [pair("cheap", "meds", 7), pair("meds", "now", 7)]
    assert pair_tokens(["one"], 7) == [] and pair_tokens([], 7) == []
