"""The tokenizer: Unicode words, normalisation, lengths, stop words, URLs, n-grams."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nbspam import tokenizer as tokenizer_module
from nbspam.config import TokenizerConfig
from nbspam.errors import ConfigError
from nbspam.tokenizer import (
    _ASCII_ADDRESS_RE,
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
    assert Tokenizer(dataclasses.replace(cfg, stop_words=stop)).words("The foo STRASSE bar") == [
        "bar"
    ]


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
        "from nbspam.features import Analyzer\n"
        "from nbspam.config import TokenizerConfig\n"
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


def test_ascii_text_is_tokenized_without_importing_regex():
    probe = (
        "import sys\n"
        "from nbspam.config import TokenizerConfig\n"
        "from nbspam.tokenizer import Tokenizer\n"
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
