"""Bad input through the commands: no traceback, every message scored or reported."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tests.helpers import cli_run

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
MIME = (SAMPLE / "train" / "spam" / "001.eml").read_bytes()


def malformed(folder: Path) -> list[Path]:
    """A folder of messages that are hard to read, each a file."""
    folder.mkdir(parents=True)
    cases = {
        "empty.eml": b"",
        "garbage.bin": bytes(range(256)) * 40,
        "truncated.eml": MIME[: len(MIME) // 2],
        "wrong-charset.eml": (
            b"Subject: caf\xe9\nContent-Type: text/plain; charset=utf-8\n\nna\xefve \xff\xfe prices"
        ),
        "unknown-charset.eml": b"Content-Type: text/plain; charset=x-nonsense-42\n\nhello \xe4",
        "no-boundary.eml": b"Content-Type: multipart/mixed\n\n--x\nhello\n--x--\n",
        "header-junk.eml": b"Subject: \x00\x01\xff\x80 win\nFrom: <<<@@@>>>\n\nbody",
        "nul-bytes.eml": b"From: a@b.example\n\n" + b"\x00" * 1000,
        "huge.eml": b"Subject: big\n\n" + b"free money now " * 3_500_000,  # 52 MB
    }
    paths = []
    for name, data in cases.items():
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    os.symlink(folder, folder / "loop")  # a folder that contains itself
    return paths


@pytest.fixture(scope="module")
def model(sample_model_path) -> Path:
    return sample_model_path


def test_predict_scores_or_reports_every_input(model, tmp_path):
    files = malformed(tmp_path / "bad")
    missing = tmp_path / "missing.eml"
    result = cli_run("predict", "-m", model, "-f", "jsonl", tmp_path / "bad", missing)
    assert result.exit_code == 3
    assert isinstance(result.exception, SystemExit)  # an exit status, not a crash
    scored = [json.loads(line)["path"] for line in result.stdout.splitlines()]
    binary, empty = tmp_path / "bad" / "garbage.bin", tmp_path / "bad" / "empty.eml"
    # each file once, loop not entered, binary data and the empty file reported instead
    assert sorted(scored) == sorted(str(p) for p in files if p not in (binary, empty))
    reported = result.stderr.splitlines()
    assert f"{missing}: no such file or directory" in reported
    assert f"{binary}: binary data, not a message" in reported
    assert f"{empty}: empty, not a message" in reported
    assert any(
        line.startswith(f"{tmp_path / 'bad' / 'loop'}: folder already read") for line in reported
    )
    huge = tmp_path / "bad" / "huge.eml"
    assert f"note: {huge}: read the first 8 MiB of 50.1 MiB, the rest left out" in reported
    assert reported[-1] == "4 inputs skipped, see above"
    assert len(reported) == 6  # one line a problem, and the count


def test_train_reads_bad_messages_and_accounts_for_them(tmp_path):
    malformed(tmp_path / "data" / "spam")
    (tmp_path / "data" / "ham").mkdir()
    for path in sorted((SAMPLE / "train" / "ham").iterdir()):
        (tmp_path / "data" / "ham" / path.name).write_bytes(path.read_bytes())
    out = tmp_path / "m.nbm"
    result = cli_run("train", tmp_path / "data", "-o", out)
    assert result.exit_code == 3, result.output
    assert isinstance(result.exception, SystemExit)  # an exit status, not a crash
    assert re.search(
        r"^read 31 messages \(ham 24, spam 7\)", result.stderr, re.M
    )
    assert result.stderr.count("folder already read") == 1
    assert out.exists()


def test_a_huge_message_is_cut_not_skipped():
    from nbspam.core.settings import TokenizerConfig
    from nbspam.text.features import Analyzer

    huge = b"Subject: big\nContent-Type: text/plain\n\n" + b"free money now " * 3_500_000
    tokens = Analyzer(TokenizerConfig()).tokens(huge)
    assert "nbspam:truncated" in tokens and "subject:big" in tokens
    # the body is cut at max_body_chars (200,000 characters, 15 per "free money now ")
    assert tokens.count("free") == 200_000 // 15 + 1
