"""The drift margin of the spam cutoff, measured on a chronological split of the training
messages where they carry dates (`calibration.drift_from_dates`), and what train and info
say of it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from nbspam.core.settings import build_settings
from nbspam.evaluation.evaluation import tokenize_all
from nbspam.fit import calibration, metrics
from nbspam.fit.calibration import DRIFT, drift_from_dates, spread
from nbspam.fit.selection import internal_cv
from nbspam.mail.headers import message_time
from nbspam.mail.message import Message
from tests.helpers import cli_run

MULTINOMIAL = build_settings({"event_model": "multinomial"})


def mail(day: int, body: str) -> bytes:
    return (
        f"From: someone@example.com\nDate: {day:02d} Jan 2024 10:00:00 +0000\n"
        f"Subject: note {day}\n\n{body}\n"
    ).encode()


def drifting(dated: bool = True, drift: bool = True) -> list[tuple[str, bytes]]:
    """20 ham and 20 spam over January: the 10 older ham (days 1-10) talk of meetings, the
    10 newer ham (days 21-30) read like the spam (as a newsletter that the user wants
    does), unless not ``drift``; the spam are alike all month. Without ``dated`` the same
    bodies have no Date."""
    spammy = "free offer money winner click prize now"
    ham = [(d, f"meeting notes agenda lunch project item{d}") for d in range(1, 11)]
    newer = spammy if drift else "meeting notes agenda lunch project"
    ham += [(d, f"{newer} item{d}") for d in range(21, 31)]
    spam = [(d, f"{spammy} item{d} spam{d}") for d in range(1, 31, 3)]
    spam += [(d, f"{spammy} item{d} spam{d}") for d in range(2, 31, 3)]
    out = [("ham", mail(d, body)) for d, body in ham] + [
        ("spam", mail(d, body)) for d, body in spam
    ]
    if not dated:
        out = [(label, re.sub(rb"Date: [^\n]*\n", b"", data)) for label, data in out]
    return out


def tokenized(messages):
    data = tokenize_all(
        [Message(f"{label}/{i}", body, label) for i, (label, body) in enumerate(messages)],
        MULTINOMIAL.tokenizer,
    )
    times = np.array([message_time(body) or np.nan for _, body in messages])
    return data, times


def test_the_newer_ham_that_score_like_spam_raise_the_spam_cutoff():
    data, times = tokenized(drifting())
    record = drift_from_dates(data, times, MULTINOMIAL, folds=5)
    # The older half (ham of days 1-10, spam of days 1-15) is too small for the bound to
    # show 0.1%, so its cutoff lies just above its highest ham: meeting notes, far below the
    # spam. Each of the 10 newer ham reads like spam and scores above it.
    assert record["dated"] == 40
    assert record["newer_ham"] == 10
    assert record["newer_false_positives"] == 10
    # far more than the whole spread of the older ham's scores: at most that is taken
    assert record["drift"] == calibration.MAX_DRIFT == 1.0

    # train's rule: the cutoffs of the bound, raised by that share of the ham's spread
    choice = internal_cv(data, MULTINOMIAL, times=times)
    assert choice.drift == record
    odds = choice.scores.log_odds
    pos = np.array(data.labels) == "spam"
    plain = metrics.choose_cutoffs_for_bound(
        odds, pos, 0.001, confidence=calibration.CONFIDENCE, cost_unsure=0.5
    )[1]
    assert choice.rule.cutoffs[1] == pytest.approx(plain + record["drift"] * spread(odds[~pos]))
    # without dates, the fixed share
    undated = internal_cv(data, MULTINOMIAL)
    assert undated.drift is None
    assert undated.rule.cutoffs[1] == pytest.approx(plain + DRIFT * spread(odds[~pos]))


def test_the_fixed_margin_stays_where_the_newer_mail_is_like_the_older():
    """Dates may only widen the band: one split by date is a small sample of drift."""
    data, times = tokenized(drifting(drift=False))
    record = drift_from_dates(data, times, MULTINOMIAL, folds=5)
    assert record["newer_false_positives"] == 0
    assert record["drift"] == DRIFT


def test_too_few_dates_or_given_cutoffs_measure_nothing():
    data, times = tokenized(drifting())
    assert drift_from_dates(data, np.full(len(times), np.nan), MULTINOMIAL, folds=5) is None
    few = times.copy()
    few[np.array(data.labels) == "spam"][1:] = np.nan
    few[np.flatnonzero(np.array(data.labels) == "spam")[9:]] = np.nan  # 9 spam of 10 needed
    assert drift_from_dates(data, few, MULTINOMIAL, folds=5) is None
    given = build_settings({"event_model": "multinomial", "cutoffs": (-1.0, 1.0)})
    assert drift_from_dates(data, times, given, folds=5) is None


def write(tmp_path, messages):
    for i, (label, body) in enumerate(messages):
        folder = tmp_path / "data" / label
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:02d}.eml").write_bytes(body)
    return tmp_path / "data"


DRIFT_LINE = re.compile(
    r"spam cutoff raised by (\d+\.\d)% of the ham's spread, measured by date on 40 messages: "
    r"10 of the newer 10 ham scored above the cutoff fitted on the older half"
)


def test_train_and_info_say_how_the_cutoff_was_raised(tmp_path):
    data = write(tmp_path, drifting())
    out = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", out, "--event-model", "multinomial", "-v")
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    expected = next(line for line in lines if line.startswith("expected false positives: "))
    # 20 ham out of fold: none at or above the spam cutoff, at most 1 - 0.2^(1/20) = 7.73%
    assert expected.startswith(
        "expected false positives: 0.00% of ham (0 of 20 out of fold), at most 7.73% at 80% "
        "confidence; "
    )
    drift = next(line for line in lines if line.startswith("drift: "))
    assert DRIFT_LINE.fullmatch(drift.removeprefix("drift: "))
    info = cli_run("info", "-m", out)
    assert info.exit_code == 0, info.output
    shown = [line for line in info.stdout.splitlines() if line.startswith(("expected:", "drift:"))]
    assert shown[0] == "expected:   " + expected.removeprefix("expected false positives: ")
    assert DRIFT_LINE.fullmatch(shown[1].removeprefix("drift:      "))


def test_undated_messages_keep_the_fixed_margin(tmp_path):
    data = write(tmp_path, drifting(dated=False))
    out = tmp_path / "m.nbm"
    result = cli_run("train", data, "-o", out, "--event-model", "multinomial", "-v")
    assert result.exit_code == 0, result.output
    assert (
        "drift: spam cutoff raised by 4.0% of the ham's spread (fixed: too few training "
        "messages carry a date to measure it)"
    ) in result.stderr.splitlines()


# The Date headers a chronological split reads: the first Date field, as the standard
# library's header parser gives it, whatever the header block holds.
DATE_HEADS = [
    b"From: a@example.com\nDate: Tue, 02 Jan 2024 10:00:00 +0100\nSubject: hi",
    b"DATE:Tue, 02 Jan 2024 10:00:00 -0500",  # any case, no blank
    b"Date: Tue, 02 Jan 2024\n\t10:00:00 +0000\nX-A: b",  # folded
    b"Date: Tue, 02 Jan 2024 10:00:00 +0000\r\nDate: Wed, 03 Jan 2024 10:00:00 +0000",
    b"X-Date: Tue, 02 Jan 2024 10:00:00 +0000\nSubject: no date",
    b"Subject: x\nDate: Tue, 02 Jan 2024 10:00:\xe900 +0000",  # not ASCII: no date
    b"Subject: x\nnot a header line\nDate: Tue, 02 Jan 2024 10:00:00 +0000",  # in the body
    b"Subject: x\nFrom someone Tue Jan  2 10:00:00 2024\nDate: Tue, 02 Jan 2024 10:00:00 +0000",
    b" Date: Tue, 02 Jan 2024 10:00:00 +0000",  # a first line that continues nothing
    b"Subject: x\rDate: Tue, 02 Jan 2024 10:00:00 +0000",  # a bare CR ends a line
    b"Date : Tue, 02 Jan 2024 10:00:00 +0000",
    b": x\nDate: Tue, 02 Jan 2024 10:00:00 +0000",
    b"Date: yesterday",
    b"Date: Tue, 02 Jan 2024 10:00:00",  # no zone: UTC
    b"",
    # the body with no blank line before it: the header ends at its first line
    b"Subject: x\nDate: Tue, 02 Jan 2024 10:00:00 +0000\nbody line\nDate: Wed, 03 Jan 2024",
    b"Subject: x\nDate: Tue, 02 Jan 2024\nbody line\n\t10:00:00 +0000",
    b"Subject: x\nbody line\rDate: Tue, 02 Jan 2024 10:00:00 +0000",
    b"Subject: x\rDate: Tue, 02 Jan 2024 10:00:00 +0000\nbody line",
    b"Subject: x\nFrom someone Tue Jan  2 10:00:00 2024\nbody\nDate: Tue, 02 Jan 2024",
    b"Subject: x\n: x\nbody line\nDate: Tue, 02 Jan 2024 10:00:00 +0000",
    b"Subject: x\nbody line\nFrom someone\nDate: Tue, 02 Jan 2024 10:00:00 +0000",
    b"body line\nDate: Tue, 02 Jan 2024 10:00:00 +0000",
    b"Subject: x\nDate: Tue, 02 Jan 2024 10:00:00 +0000\r\nbody \xe9\r\nX: y",
]


@pytest.mark.parametrize("head", DATE_HEADS)
def test_the_date_is_the_one_the_standard_header_parser_reads(head):
    from email.parser import BytesHeaderParser
    from email.policy import compat32

    from nbspam.mail.headers import date_value

    value = BytesHeaderParser(policy=compat32).parsebytes(head + b"\n\n").get("date")
    want = value if isinstance(value, str) else None
    # the same but for CRLF line breaks, which a date reads as blanks
    assert date_value(head) == (want and want.replace("\r\n", "\n"))


def test_an_ordinary_header_block_is_not_given_to_the_standard_parser(monkeypatch):
    """Training reads the Date of every message in its one main process: the standard
    library's header parser took a quarter of a millisecond a message there."""
    import email.parser

    def refuse(*args, **kwargs):
        raise AssertionError("the header block was parsed whole")

    monkeypatch.setattr(email.parser, "BytesHeaderParser", refuse)
    head = b"Received: from a by b; Tue, 02 Jan 2024 10:00:00 +0000\nDate: Tue, 02 Jan 2024 11:00:00 +0100"
    assert message_time(head + b"\nSubject: s\n\nbody\n") == 1704189600.0
    assert message_time(head.replace(b"\n", b"\r\n") + b"\r\n\r\nbody\r\n") == 1704189600.0


def test_a_body_with_no_blank_line_before_it_is_not_given_to_the_standard_parser(monkeypatch):
    """Every message of the Enron corpus is a Subject line, then its body: each was parsed
    whole by the standard library, which ends the header at the first line that is no
    header line (0.13 s of the main process's CPU for enron1's 4,137 training messages)."""
    import email.parser

    def refuse(*args, **kwargs):
        raise AssertionError("the header block was parsed whole")

    monkeypatch.setattr(email.parser, "BytesHeaderParser", refuse)
    assert message_time(b"Subject: tree farm\nthe pictures, Date: today\n") is None
    dated = b"Subject: s\nDate: Tue, 02 Jan 2024 11:00:00 +0100\nbody\r\nDate: 1 Jan 2020\n"
    assert message_time(dated) == 1704189600.0


def test_an_odd_header_block_is_given_to_the_standard_parser_no_further_than_the_tokens_read(
    monkeypatch,
):
    """A block the standard parser reads its own way (here nameless lines, and no blank
    line) was given to it whole: 8 MB took it some 6 seconds of the main process. It is
    read as the tokens' parser reads a header block: to its last line break before
    `mailparse.MAX_HEADER_BYTES`."""
    import email.parser

    from nbspam.mail.mailparse import MAX_HEADER_BYTES

    given = []
    parser = email.parser.BytesHeaderParser

    class Recording(parser):
        def parsebytes(self, text, headersonly=True):
            given.append(len(text))
            return super().parsebytes(text, headersonly)

    monkeypatch.setattr(email.parser, "BytesHeaderParser", Recording)
    head = b"Date: Tue, 02 Jan 2024 11:00:00 +0100\n:nameless\n"
    assert message_time(head + b":a\n" * 1_000_000) == 1704189600.0
    assert given and max(given) <= MAX_HEADER_BYTES + 2
