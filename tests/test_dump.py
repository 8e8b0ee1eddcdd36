"""A model as text and back: restoring a dump gives the very bytes of the model file, and a
damaged dump is refused in one line that names the line, writing nothing."""

from __future__ import annotations

import dataclasses
import io
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbspam.core.settings import build_settings
from nbspam.errors import InputError
from nbspam.models.model import Model, fit
from nbspam.store.dump import MAX_LINE, dump_chunks, dump_lines, escape, restore
from nbspam.store.modelfile import load_model, save_model
from tests.helpers import SAMPLE, assert_same_model, cli_run, nbspam_process
from tests.test_naive_bayes import random_counts


def dumped(model: Model) -> bytes:
    return b"".join(dump_chunks(model))


def restored_bytes(path, tmp_path) -> bytes:
    """The bytes of the model file made of the dump of the model file at ``path``."""
    out = tmp_path / "restored.nbm"
    save_model(restore(io.BytesIO(dumped(load_model(path)))), out)
    return out.read_bytes()


# -- round trips -------------------------------------------------------------------------------


def test_the_sample_model_comes_back_byte_for_byte(sample_model_path, tmp_path):
    assert restored_bytes(sample_model_path, tmp_path) == sample_model_path.read_bytes()


@pytest.mark.parametrize(
    "options",
    [
        ("--event-model=fisher",),
        ("--event-model=bernoulli", "--prior=uniform"),
        ("--ngrams=2", "--prior=ham=2,spam=1", "--min-count=2", "--max-features=300"),
        ("--no-calibrate", "--target-fpr=0.01", "--stop-words=none"),
    ],
)
def test_other_event_models_and_settings_come_back_byte_for_byte(sample_models, options, tmp_path):
    path = sample_models(*options)
    assert restored_bytes(path, tmp_path) == path.read_bytes()


def test_a_model_after_learn_and_forget_comes_back_byte_for_byte(sample_model, tmp_path):
    new = SAMPLE / "new"
    assert cli_run("learn", "-m", sample_model, "--label", "spam", new / "001.eml").exit_code == 0
    assert cli_run("learn", "-m", sample_model, "--label", "ham", new / "002.eml").exit_code == 0
    spam = sorted((SAMPLE / "train" / "spam").iterdir())[0]
    assert cli_run("forget", "-m", sample_model, spam).exit_code == 0
    assert cli_run("compact", "-m", sample_model).exit_code == 0  # the journal into the file
    assert "updated" in load_model(sample_model).info
    assert restored_bytes(sample_model, tmp_path) == sample_model.read_bytes()


def test_a_model_of_three_classes_comes_back_byte_for_byte(tmp_path):
    table = tmp_path / "three.tsv"
    table.write_text(
        "".join(
            f"{label}\t{text} number {i}\n"
            for i in range(4)
            for label, text in [
                ("cooking", "boil the pasta with salt"),
                ("football", "the striker scored twice"),
                ("gardening", "prune the roses in march"),
            ]
        )
    )
    path = tmp_path / "three.nbm"
    assert cli_run("train", table, "-o", path).exit_code == 0
    assert load_model(path).labels == ("cooking", "football", "gardening")
    assert restored_bytes(path, tmp_path) == path.read_bytes()


ODD_TERMS = [
    "tab\there",
    "back\\slash",
    "\\u0041 is not an escape",
    "carriage\rreturn",
    "nul\x00and\x1bescape",
    "del\x7f c1\x85 nel",
    "line\u2028separator\u2029",
    "#hashtag",
    "end",
    "terms",
    "digests",
    "class",
    " spaces ",
    "ünïcödé",
    "東京",
    "emoji 🙂",
    "zero\u200bwidth",
]


def odd_model() -> Model:
    """A model with terms and labels that need escaping, odd floats and a rich history."""
    X, y, _ = random_counts(7, d=len(ODD_TERMS), classes=("h\tam", "sp\\am\n"))
    model = fit(X, y, ODD_TERMS, build_settings({"positive": "sp\\am\n"}))
    return dataclasses.replace(
        model,
        cutoffs=(-1e-300, 0.1 + 0.2),
        calibration=(5e-324, -1.7976931348623157e308),
        info={"created": "2025-01-01T00:00:00Z", "note": "ünï\ttab", "big": 2**70, "x": 0.1},
    )


def test_terms_and_labels_that_need_escaping_come_back(tmp_path):
    model = odd_model()
    save_model(model, tmp_path / "odd.nbm")
    text = dumped(model).decode("utf-8")
    assert "\r" not in text and "\x00" not in text and "\u2028" not in text
    assert all(line.count("\t") == 4 for line in text.splitlines()[10:27])  # 17 terms
    assert "class\th\\tam\t30\n" in text
    assert "tab\\there\t" in text and "back\\\\slash\t" in text and "nul\\u0000and\\u001b" in text
    back = restore(io.BytesIO(text.encode()))
    assert_same_model(back, model)
    assert (back.cutoffs, back.calibration, back.info) == (
        model.cutoffs,
        model.calibration,
        model.info,
    )
    save_model(back, tmp_path / "back.nbm")
    assert (tmp_path / "back.nbm").read_bytes() == (tmp_path / "odd.nbm").read_bytes()


def test_escape_leaves_ordinary_text_alone():
    assert (
        escape("ordinary words, ünïcode 東京 and #tags") == "ordinary words, ünïcode 東京 and #tags"
    )
    assert escape("a\\b\tc\nd\re\x00\udc80") == "a\\\\b\\tc\\nd\\re\\u0000\\udc80"


term_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), min_size=1, max_size=8
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    terms=st.lists(term_text, min_size=1, max_size=12, unique=True),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_terms_and_counts_come_back(terms, seed):
    rng = np.random.default_rng(seed)
    terms = sorted(terms)
    d = len(terms)
    class_count = rng.integers(1, 50, size=2)
    doc_count = np.array([rng.integers(0, n + 1, size=d) for n in class_count])
    term_count = doc_count * rng.integers(1, 4, size=(2, d))
    model = Model(
        labels=("ham", "spam"),
        terms=tuple(terms),
        class_count=class_count,
        term_count=term_count,
        doc_count=doc_count,
        tokenizer=build_settings({}).tokenizer,
        training=build_settings({"positive": "spam", "event_model": "multinomial"}).training,
    )
    assert_same_model(restore(io.BytesIO(dumped(model))), model)


def test_dump_lines_are_the_dump(sample_model_path):
    model = load_model(sample_model_path)
    assert "\n".join(dump_lines(model)) + "\n" == dumped(model).decode("utf-8")


# -- damaged dumps -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lines(sample_model_path) -> list[str]:
    """The sample model's dump as lines, without their line feeds. Lines 1-9 are the first
    line, a comment, tokenizer, train, cutoffs, calibration, info and the two classes (ham,
    spam); line 10 opens the terms."""
    return dumped(load_model(sample_model_path)).decode("utf-8").split("\n")[:-1]


def joined(lines: list[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode("utf-8")


def first(lines: list[str], start: str) -> int:
    """The number of the first line that starts with ``start``."""
    return next(i + 1 for i, line in enumerate(lines) if line.startswith(start))


def replaced(lines: list[str], number: int, line: str) -> list[str]:
    return lines[: number - 1] + [line] + lines[number:]


def terms_line(lines: list[str]) -> int:
    return first(lines, "terms\t")


def digests_line(lines: list[str]) -> int:
    return first(lines, "digests\t")


def field(lines: list[str], number: int, index: int, value: str) -> list[str]:
    """``lines`` with field ``index`` of line ``number`` replaced by ``value``."""
    fields = lines[number - 1].split("\t")
    fields[index] = value
    return replaced(lines, number, "\t".join(fields))


def term_of(lines: list[str], number: int) -> str:
    return lines[number - 1].split("\t")[0]


def _truncated_in_a_line(lines):
    data = joined(lines)
    middle = len(data) // 2
    if data[middle - 1 : middle] == b"\n":  # inside a line, not at its end
        middle += 1
    cut = data[:middle]
    number = cut.count(b"\n") + 1
    return cut, f"line {number}: cut short (no line feed at its end): the dump is truncated"


def _truncated_in_the_terms(lines):
    n = terms_line(lines) + 5
    return joined(
        lines[:n]
    ), f"line {n + 1}: the dump ends in its terms, without its 'end' line: it is truncated"


def _truncated_before_the_end(lines):
    return joined(
        lines[:-1]
    ), f"line {len(lines)}: the dump ends in its digests, without its 'end' line: it is truncated"


def _truncated_in_the_header(lines):
    return joined(
        lines[:5]
    ), "line 6: the dump ends in its header, without its 'end' line: it is truncated"


def _a_bad_count(lines):
    n = terms_line(lines) + 3
    return joined(field(lines, n, 2, "1x")), (
        f"line {n}: occurrences_spam of the term {term_of(lines, n)!r} is not a whole number >= 0: '1x'"
    )


def _a_negative_count(lines):
    n = terms_line(lines) + 3
    return joined(field(lines, n, 3, "-1")), (
        f"line {n}: documents_ham of the term {term_of(lines, n)!r} is not a whole number >= 0: '-1'"
    )


def _a_count_over_the_limit(lines):
    n = terms_line(lines) + 2
    fields = lines[n - 1].split("\t")
    bad = "\t".join([fields[0], str(2**63), str(2**63), fields[3], fields[4]])
    return joined(replaced(lines, n, bad)), (
        f"line {n}: a count of the term {fields[0]!r} is over 2^63 - 1"
    )


def _a_term_line_with_a_column_missing(lines):
    n = terms_line(lines) + 4
    return joined(replaced(lines, n, lines[n - 1].rsplit("\t", 1)[0])), (
        f"line {n}: 4 field(s), but a term line has 5: the term, its occurrences in each of "
        f"the 2 classes, then its documents in each"
    )


def _a_term_line_with_a_column_more(lines):
    n = terms_line(lines) + 4
    return joined(replaced(lines, n, lines[n - 1] + "\t0")), (
        f"line {n}: 6 field(s), but a term line has 5: the term, its occurrences in each of "
        f"the 2 classes, then its documents in each"
    )


def _crlf_line_ends(lines):
    return joined(lines).replace(b"\n", b"\r\n"), (
        "line 1: not an nbspam dump: it must start with the line '# nbspam dump 1'"
    )


def _an_unknown_header_field(lines):
    return joined(lines[:6] + ['colour\t"blue"'] + lines[6:]), (
        "line 7: unknown header field 'colour' (the header has tokenizer, train, cutoffs, "
        "calibration, info, class, terms)"
    )


def _an_unknown_header_field_of_any_length(lines):
    return joined(lines[:6] + ["x" * 100_000 + '\t"blue"'] + lines[6:]), (
        f"line 7: unknown header field {'x' * 60!r}... (the header has tokenizer, train, "
        "cutoffs, calibration, info, class, terms)"
    )


def _bad_json(lines):
    return joined(replaced(lines, 4, 'train\t{"alpha": 0.1,')), (
        "line 4: train: not JSON (Expecting property name enclosed in double quotes at character 15)"
    )


def _not_a_number_in_json(lines):
    return joined(replaced(lines, 6, "calibration\t[NaN, 1.0]")), (
        "line 6: calibration: not JSON (NaN is not a number)"
    )


def _a_setting_out_of_range(lines):
    return joined(replaced(lines, 4, re.sub('"alpha": [0-9.]+', '"alpha": -1', lines[3]))), (
        "line 4: train: setting alpha must be a finite number >= 0, not -1.0"
    )


def _an_unknown_setting(lines):
    return joined(replaced(lines, 3, lines[2].replace("{", '{"colour": 1, ', 1))), (
        "line 3: tokenizer: unknown setting 'colour'"
    )


def _cutoffs_the_wrong_way_round(lines):
    return joined(replaced(lines, 5, "cutoffs\t[5.0, -5.0]")), (
        "line 5: cutoffs: the ham cutoff 5 must not be above the spam cutoff -5"
    )


def _info_not_an_object(lines):
    return joined(replaced(lines, 7, "info\t[]")), "line 7: info is not a mapping"


def _info_auto_a_number(lines):
    return joined(replaced(lines, 7, 'info\t{"auto": 5}')), "line 7: info.auto is not a mapping"


def _info_pruned_a_number(lines):
    return joined(replaced(lines, 7, 'info\t{"pruned": 5}')), (
        "line 7: info.pruned must hold terms_dropped, a whole number >= 0"
    )


def _info_expired_without_a_date(lines):
    return joined(replaced(lines, 7, 'info\t{"expired": {"digests": 3}}')), (
        "line 7: info.expired must hold last, a date as text"
    )


def _a_class_count_of_5000_digits(lines):
    return joined(field(lines, 8, 2, "9" * 5000)), (
        f"line 8: the messages of class 'ham' is over 2^63 - 1: {'9' * 60!r}..."
    )


def _a_term_count_of_5000_digits(lines):
    n = terms_line(lines) + 2
    return joined(field(lines, n, 1, "9" * 5000)), (
        f"line {n}: a count of the term {term_of(lines, n)!r} is over 2^63 - 1"
    )


def _a_header_field_twice(lines):
    return joined(lines[:7] + [lines[4]] + lines[7:]), "line 8: cutoffs again (first on line 5)"


def _a_header_field_missing(lines):
    return joined(
        lines[:4] + lines[5:]
    ), "line 9: the terms begin, but the header has no cutoffs line"


def _the_positive_label_not_a_class(lines):
    return joined(
        replaced(lines, 4, lines[3].replace('"positive": "spam"', '"positive": "eggs"'))
    ), ("line 4: train: the positive label 'eggs' is not a class")


def _one_class(lines):
    return joined(
        lines[:8] + lines[9:]
    ), "line 9: the terms begin after 1 class line(s): a model has at least 2"


def _classes_out_of_order(lines):
    return joined(lines[:7] + [lines[8], lines[7]] + lines[9:]), (
        "line 9: the class 'ham' after 'spam': classes are sorted by label, each once"
    )


def _a_class_without_messages(lines):
    return joined(replaced(lines, 9, "class\tspam\t0")), (
        "line 9: the class 'spam' has no messages: a class has at least one"
    )


def _wrong_column_headings(lines):
    n = terms_line(lines)
    return joined(replaced(lines, n, "terms\tterm\tham\tspam\tham\tspam")), (
        f"line {n}: the column headings of the terms must be "
        "'terms\\tterm\\toccurrences_ham\\toccurrences_spam\\tdocuments_ham\\tdocuments_spam'"
    )


def _a_term_twice(lines):
    n = terms_line(lines) + 6
    return joined(lines[:n] + [lines[n - 1]] + lines[n:]), (
        f"line {n + 1}: the term {term_of(lines, n)!r} again: each term has one line"
    )


def _terms_out_of_order(lines):
    n = terms_line(lines) + 6
    a, b = lines[n - 1], lines[n]
    return joined(lines[: n - 1] + [b, a] + lines[n + 1 :]), (
        f"line {n + 1}: the term {term_of(lines, n)!r} after {term_of(lines, n + 1)!r}: "
        "terms are sorted by code point"
    )


def _an_empty_term(lines):
    n = terms_line(lines) + 1
    return joined(field(lines, n, 0, "")), f"line {n}: an empty term"


def _an_unknown_escape(lines):
    n = terms_line(lines) + 1
    return joined(
        field(lines, n, 0, "\\q")
    ), f"line {n}: the term '\\\\q' has an unknown escape \\q"


def _a_lone_surrogate(lines):
    n = terms_line(lines) + 1
    return joined(field(lines, n, 0, "\\udc80")), (
        f"line {n}: the term '\\\\udc80' holds a lone surrogate, which a model cannot hold"
    )


def _a_line_feed_in_a_term(lines):
    n = terms_line(lines) + 1
    return joined(field(lines, n, 0, "\\n")), (
        f"line {n}: the term '\\\\n' holds a line feed, which a model's terms cannot"
    )


def _more_documents_than_occurrences(lines):
    n = terms_line(lines) + 1
    fields = lines[n - 1].split("\t")
    bad = field(field(lines, n, 2, "1"), n, 4, "2")
    return joined(bad), (
        f"line {n}: the term {fields[0]!r} is in 2 spam messages but occurs only 1 times there"
    )


def _occurrences_without_documents(lines):
    n = terms_line(lines) + 1
    bad = field(field(lines, n, 1, "3"), n, 3, "0")
    return joined(
        bad
    ), f"line {n}: the term {term_of(lines, n)!r} occurs 3 times in ham but in no ham message"


def _more_documents_than_the_class_has(lines):
    n = terms_line(lines) + 1
    bad = field(field(lines, n, 1, "99"), n, 3, "25")
    return joined(
        bad
    ), f"line {n}: the term {term_of(lines, n)!r} is in 25 ham messages, but the class has 24"


def _a_bad_hex_digest(lines):
    n = digests_line(lines) + 2
    return joined(field(lines, n, 0, "zz" + lines[n - 1][2:32])), (
        f"line {n}: not a digest of 32 lowercase hex digits: {'zz' + lines[n - 1][2:32]!r}"
    )


def _an_uppercase_digest(lines):
    n = digests_line(lines) + 2
    upper = lines[n - 1][:32].upper()
    return joined(field(lines, n, 0, upper)), (
        f"line {n}: not a digest of 32 lowercase hex digits: {upper!r}"
    )


def _a_short_digest(lines):
    n = digests_line(lines) + 2
    return joined(field(lines, n, 0, lines[n - 1][:30])), (
        f"line {n}: not a digest of 32 lowercase hex digits: {lines[n - 1][:30]!r}"
    )


def _a_digest_twice(lines):
    n = digests_line(lines) + 2
    return joined(lines[:n] + [lines[n - 1]] + lines[n:]), (
        f"line {n + 1}: the digest {lines[n - 1][:32]} again: digests are sorted, each once"
    )


def _digests_out_of_order(lines):
    n = digests_line(lines) + 2
    a, b = lines[n - 1], lines[n]
    return joined(lines[: n - 1] + [b, a] + lines[n + 1 :]), (
        f"line {n + 1}: the digest {a[:32]} after {b[:32]}: digests are sorted, each once"
    )


def _a_digest_of_an_unknown_label(lines):
    n = digests_line(lines) + 1
    return joined(field(lines, n, 1, "eggs")), f"line {n}: the label 'eggs' is not a class"


def _no_digests_line(lines):
    n = digests_line(lines)
    return joined([*lines[: n - 1], "end"]), (
        f"line {n}: the 'end' line before the digests: the line 'digests\\tdigest\\tlabel\\tlearned' is "
        "missing"
    )


def _more_after_the_end(lines):
    return joined(
        [*lines, "end"]
    ), f"line {len(lines) + 1}: more after the 'end' line, which ends a dump"


def _an_empty_line(lines):
    return joined(lines[:4] + [""] + lines[4:]), "line 5: an empty line"


def _a_newer_format(lines):
    return joined(["# nbspam dump 2", *lines[1:]]), (
        "line 1: a dump of format 2, newer than this nbspam 0.1.0 reads (1); upgrade nbspam"
    )


def _empty_input(lines):
    return b"", "line 1: the input is empty, not an nbspam dump"


def _binary_garbage(lines):
    return bytes(
        range(256)
    ) * 64, "line 1: not an nbspam dump: it must start with the line '# nbspam dump 1'"


def _garbage_after_the_first_line(lines):
    return b"# nbspam dump 1\n\xff\xfe\x00garbage\n", "line 2: not UTF-8 text (byte 1 of the line)"


def _a_model_file(lines):
    from nbspam.store.container import MAGIC

    return MAGIC + b"\x01\x00\x00\x00", (
        "line 1: this is a model file, not a dump ('nbspam dump -m MODEL' makes a dump of it)"
    )


def _a_huge_line(lines):
    return joined(lines[:6]) + b"info\t" + b"x" * MAX_LINE + b"\n", (
        f"line 7: longer than {MAX_LINE:,} bytes, the most a line may have"
    )


DAMAGES = [
    _truncated_in_a_line,
    _truncated_in_the_terms,
    _truncated_before_the_end,
    _truncated_in_the_header,
    _a_bad_count,
    _a_negative_count,
    _a_count_over_the_limit,
    _a_term_line_with_a_column_missing,
    _a_term_line_with_a_column_more,
    _crlf_line_ends,
    _an_unknown_header_field,
    _an_unknown_header_field_of_any_length,
    _bad_json,
    _not_a_number_in_json,
    _a_setting_out_of_range,
    _an_unknown_setting,
    _cutoffs_the_wrong_way_round,
    _info_not_an_object,
    _info_auto_a_number,
    _info_pruned_a_number,
    _info_expired_without_a_date,
    _a_class_count_of_5000_digits,
    _a_term_count_of_5000_digits,
    _a_header_field_twice,
    _a_header_field_missing,
    _the_positive_label_not_a_class,
    _one_class,
    _classes_out_of_order,
    _a_class_without_messages,
    _wrong_column_headings,
    _a_term_twice,
    _terms_out_of_order,
    _an_empty_term,
    _an_unknown_escape,
    _a_lone_surrogate,
    _a_line_feed_in_a_term,
    _more_documents_than_occurrences,
    _occurrences_without_documents,
    _more_documents_than_the_class_has,
    _a_bad_hex_digest,
    _an_uppercase_digest,
    _a_short_digest,
    _a_digest_twice,
    _digests_out_of_order,
    _a_digest_of_an_unknown_label,
    _no_digests_line,
    _more_after_the_end,
    _an_empty_line,
    _a_newer_format,
    _empty_input,
    _binary_garbage,
    _garbage_after_the_first_line,
    _a_model_file,
    _a_huge_line,
]


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda damage: damage.__name__[1:])
def test_a_damaged_dump_is_refused_with_its_line_number(lines, damage):
    data, message = damage(lines)
    with pytest.raises(InputError) as caught:
        restore(io.BytesIO(data))
    assert str(caught.value) == message


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda damage: damage.__name__[1:])
def test_restore_refuses_a_damaged_dump_in_one_line_and_writes_nothing(lines, damage, tmp_path):
    data, message = damage(lines)
    (tmp_path / "damaged.dump").write_bytes(data)
    result = cli_run("restore", tmp_path / "damaged.dump", "-o", tmp_path / "new.nbm")
    assert (result.exit_code, result.stderr, result.stdout) == (1, f"Error: {message}\n", "")
    assert os.listdir(tmp_path) == ["damaged.dump"]


class Endless:
    """A stream of one first line (or none), then a line that never ends; it counts the
    bytes read."""

    def __init__(self, first: bytes) -> None:
        self.first, self.read = first, 0

    def readline(self, limit: int = -1) -> bytes:
        assert limit > 0, "an unbounded read"
        if self.first:
            line, self.first = self.first, b""
            return line
        self.read += limit
        return b"x" * limit


@pytest.mark.parametrize("first", [b"# nbspam dump 1\n", b""], ids=["second line", "first line"])
def test_a_line_that_never_ends_is_refused_after_a_bounded_read(first):
    stream = Endless(first)
    with pytest.raises(InputError, match="^line [12]: "):
        restore(stream)
    assert stream.read <= MAX_LINE + 1


# -- the commands ------------------------------------------------------------------------------


def test_dump_writes_the_documented_lines(sample_model_path):
    model = load_model(sample_model_path)
    result = cli_run("dump", "-m", sample_model_path)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout_bytes == dumped(model)
    lines = result.stdout.split("\n")
    assert lines[:2] == [
        "# nbspam dump 1",
        "# a model of nbspam, written by nbspam 0.1.0; 'nbspam restore' reads it back",
    ]
    assert [line.split("\t")[0] for line in lines[2:7]] == [
        "tokenizer",
        "train",
        "cutoffs",
        "calibration",
        "info",
    ]
    assert lines[4:6] == ["cutoffs\t[-5.0, 5.0]", f"calibration\t{list(model.calibration)}"]
    assert lines[7:10] == [
        "class\tham\t24",
        "class\tspam\t24",
        "terms\tterm\toccurrences_ham\toccurrences_spam\tdocuments_ham\tdocuments_spam",
    ]
    j = model.terms.index("money")
    counts = [*model.term_count[:, j], *model.doc_count[:, j]]
    assert lines[10 + j] == "money\t" + "\t".join(map(str, counts))
    d = len(model.terms)
    assert lines[10 + d] == "digests\tdigest\tlabel\tlearned"
    assert lines[11 + d] == (
        f"{model.seen_digests[0].tobytes().hex()}\t{model.labels[model.seen_labels[0]]}"
        f"\t{model.seen_times[0]}"
    )
    assert lines[11 + d + 48 :] == ["end", ""]


def test_dump_to_a_file_then_restore_gives_the_model_back(sample_model_path, tmp_path):
    dump, restored = tmp_path / "spam.dump", tmp_path / "spam.nbm"
    result = cli_run("dump", "-m", sample_model_path, "-o", dump)
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        "",
        f"dumped {sample_model_path} to {dump}\n",
    )
    assert dump.read_bytes() == dumped(load_model(sample_model_path))
    result = cli_run("restore", dump, "-o", restored)
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        "",
        f"restored {restored}: 2 classes, "
        f"{len(load_model(sample_model_path).terms):,} terms, 48 messages learned\n",
    )
    assert restored.read_bytes() == sample_model_path.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["spam.dump", "spam.nbm", "spam.nbm.lock"]
    assert cli_run("info", "-m", restored).exit_code == 0


@pytest.mark.parametrize("source", [(), ("-",)], ids=["no DUMP", "-"])
def test_restore_reads_stdin(sample_model_path, tmp_path, source):
    data = dumped(load_model(sample_model_path))
    result = cli_run("restore", *source, "-o", tmp_path / "m.nbm", input=data)
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "m.nbm").read_bytes() == sample_model_path.read_bytes()


def test_restore_replaces_an_existing_model_as_merge_does(sample_models, sample_model, tmp_path):
    fisher = sample_models("--event-model=fisher")
    (tmp_path / "fisher.dump").write_bytes(dumped(load_model(fisher)))
    result = cli_run("restore", tmp_path / "fisher.dump", "-o", sample_model)
    assert result.exit_code == 0, result.stderr
    assert sample_model.read_bytes() == fisher.read_bytes()


def test_a_damaged_dump_leaves_an_existing_model_as_it_was(lines, sample_model, tmp_path):
    before = sample_model.read_bytes()
    result = cli_run("restore", "-o", sample_model, input=joined(lines[:-1]))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: line {len(lines)}: the dump ends in its digests, without its 'end' line: "
        "it is truncated\n"
    )
    assert sample_model.read_bytes() == before
    assert os.listdir(tmp_path) == ["sample.nbm"]


def test_restore_needs_an_output(tmp_path):
    result = cli_run("restore", tmp_path / "spam.dump")
    assert result.exit_code == 2 and "Missing option '-o' / '--output'" in result.stderr


def test_neither_command_writes_over_what_it_reads(sample_model, tmp_path):
    before = sample_model.read_bytes()
    result = cli_run("dump", "-m", sample_model, "-o", sample_model)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: -o {sample_model} is the model being dumped; give another file\n",
    )
    dump = tmp_path / "spam.dump"
    dump.write_bytes(dumped(load_model(sample_model)))
    result = cli_run("restore", dump, "-o", dump)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: -o {dump} is the dump being read; give another file\n",
    )
    assert sample_model.read_bytes() == before and dump.read_bytes().startswith(b"# nbspam dump 1")


def test_a_missing_dump_or_a_bad_model_is_one_line(tmp_path):
    result = cli_run("restore", tmp_path / "missing.dump", "-o", tmp_path / "m.nbm")
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: cannot read {tmp_path / 'missing.dump'}: no such file or directory\n",
    )
    bad = tmp_path / "bad.nbm"
    bad.write_bytes(b"not a model")
    result = cli_run("dump", "-m", bad, "-o", tmp_path / "bad.dump")
    assert (result.exit_code, result.stderr) == (1, f"Error: {bad} is not an nbspam model file\n")
    assert sorted(os.listdir(tmp_path)) == ["bad.nbm"]


def test_the_help_teaches_the_format_and_shows_examples():
    dump = cli_run("dump", "--help").stdout
    for text in ("backups", "# nbspam dump 1", "class  LABEL  MESSAGES", "\\uXXXX", "Example:"):
        assert text in dump, text
    assert "nbspam dump -m spam.nbm | awk -F'\\t' 'NF == 5' | sort -t$'\\t' -k3,3nr | head" in dump
    restore_help = cli_run("restore", "--help").stdout
    for text in ("byte for byte", "Error: line N: ...", "nbspam restore spam.dump -o spam.nbm"):
        assert text in restore_help, text


def test_the_commands_in_child_processes(sample_model_path, tmp_path):
    dump = nbspam_process("dump", "-m", sample_model_path)
    assert (dump.returncode, dump.stderr) == (0, b"")
    assert dump.stdout == dumped(load_model(sample_model_path))
    restored = nbspam_process("restore", "-o", tmp_path / "m.nbm", stdin=dump.stdout)
    assert restored.returncode == 0, restored.stderr
    assert (tmp_path / "m.nbm").read_bytes() == sample_model_path.read_bytes()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_dump_that_cannot_be_written_is_one_line(sample_model_path):
    with open("/dev/full", "wb") as full:
        result = nbspam_process("dump", "-m", sample_model_path, stdout=full)
    assert result.returncode == 1
    assert result.stderr == b"Error: cannot write output: no space left on device\n"


TRICKY = ["", "0", "1", "-1", "24", "25", "9" * 20, "1e3", " 1", "\\", "\\u0000", "end", "null"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.integers(0, 5),
            st.one_of(st.sampled_from(TRICKY), st.text(max_size=6)),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_a_dump_that_restores_gives_a_model_that_reads_back(lines, tmp_path_factory, edits):
    """Fields of any line replaced: refused in a line, or a model that reads back whole."""
    lines = list(lines)
    for at, index, value in edits:
        number = 3 + at % (len(lines) - 2)  # any line but the first two
        fields = lines[number - 1].split("\t")
        fields[index % len(fields)] = value.replace("\n", "")
        lines[number - 1] = "\t".join(fields)
    try:
        model = restore(io.BytesIO(joined(lines)))
    except InputError as error:
        assert str(error).startswith("line ") and "\n" not in str(error)
        return
    path = tmp_path_factory.mktemp("fuzz") / "m.nbm"
    save_model(model, path)
    assert_same_model(load_model(path), model)
    assert cli_run("info", "-m", path).exit_code == 0


@pytest.mark.parametrize("cutoffs", [(-np.inf, np.inf), (-np.inf, 2.5), (-1.0, np.inf)])
def test_infinite_cutoffs_come_back(sample_model_path, tmp_path, cutoffs):
    # the rule of least cost may leave every message of a side unsure; JSON has no infinity
    model = dataclasses.replace(load_model(sample_model_path), cutoffs=cutoffs)
    save_model(model, tmp_path / "m.nbm")
    text = dumped(load_model(tmp_path / "m.nbm"))
    assert b"Infinity" not in text
    restored = restore(io.BytesIO(text))
    assert restored.cutoffs == cutoffs
    save_model(restored, tmp_path / "r.nbm")
    assert (tmp_path / "r.nbm").read_bytes() == (tmp_path / "m.nbm").read_bytes()


def test_a_dump_given_as_a_model_points_to_restore(tmp_path, sample_model_path):
    dumped = tmp_path / "s.dump"
    assert cli_run("dump", "-m", sample_model_path, "-o", dumped).exit_code == 0
    result = cli_run("info", "-m", dumped)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: {dumped} is not an nbspam model file; a text dump is read back with "
        "'nbspam restore'\n",
    )
