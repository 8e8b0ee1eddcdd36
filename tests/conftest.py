"""Shared fixtures: the sample model, and the public corpora beside the checkout (skipped
when absent)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT, SAMPLE, cli_run, missing

CORPORA = ROOT.parent / "shared" / "corpora"
#: The options of the sample model most tests use: fixed cutoffs, so that its verdicts do
#: not move with the cross-validation that fits its calibration.
SAMPLE_OPTIONS = ("--cutoffs=-5,5",)


@pytest.fixture(autouse=True)
def default_model_folder(tmp_path, monkeypatch):
    """The default model (no -m, no -o) of a test in its own folder, never the user's."""
    monkeypatch.delenv("NBSPAM_MODEL", raising=False)
    monkeypatch.setenv("NBSPAM_DIR", str(tmp_path / "nbspam-home"))


@pytest.fixture(autouse=True)
def no_kept_groups():
    """Each test asks afresh whether a group is its owner's private one: tests give files
    to made-up users and groups, and some make up the host's users (`trust.private_group`
    keeps its answers a while)."""
    from nbspam.core import trust

    trust._PRIVATE.clear()


@pytest.fixture(scope="session")
def sample_models(tmp_path_factory):
    """``train(*options)``: the path of the model `nbspam train sample_data/train -o PATH
    OPTIONS` writes, trained once per set of options for the whole run. Shared by every
    test: never change it (`sample_model` is a copy to change)."""
    made: dict[tuple[str, ...], Path] = {}

    def train(*options: str) -> Path:
        if options not in made:
            path = tmp_path_factory.mktemp("sample") / "sample.nbm"
            result = cli_run("train", SAMPLE / "train", "-o", path, *options)
            assert result.exit_code == 0, result.stderr
            made[options] = path
        return made[options]

    return train


@pytest.fixture(scope="session")
def sample_model_path(sample_models) -> Path:
    """The sample model (cutoffs -5,5 and a calibration), shared: read it, never change it."""
    return sample_models(*SAMPLE_OPTIONS)


@pytest.fixture
def sample_model(sample_model_path, tmp_path) -> Path:
    """A copy of the sample model in the test's own folder, for tests that change it."""
    return Path(shutil.copyfile(sample_model_path, tmp_path / "sample.nbm"))


@pytest.fixture(scope="session")
def sample_messages() -> list:
    """The labelled messages of sample_data/train, read once."""
    from nbspam.mail.message import Problems
    from nbspam.mail.messages import read_labelled

    return list(read_labelled([str(SAMPLE / "train")], Problems()))


def corpus(name: str) -> Path:
    """The folder of a public corpus, or skip the test with the reason."""
    path = CORPORA / name
    if not path.is_dir():
        missing(f"corpus {name} not found at {path} (the public corpora sit beside the checkout)")
    return path


@pytest.fixture(scope="session")
def spamassassin() -> Path:
    return corpus("spamassassin")


@pytest.fixture(scope="session")
def sms() -> Path:
    return corpus("sms-spam-collection")


@pytest.fixture(scope="session")
def spamassassin_matrix(spamassassin):
    """(X, y, terms): the whole SpamAssassin corpus tokenized with the default settings."""
    from nbspam.core.settings import build_settings
    from nbspam.text.features import Analyzer
    from nbspam.text.vocabulary import TermIndex, count_rows, sorted_order

    paths = sorted(p for p in spamassassin.glob("*/*") if p.parent.name in ("ham", "spam"))
    analyzer = Analyzer(build_settings({}).tokenizer)
    index = TermIndex()
    X = count_rows((analyzer.tokens(p.read_bytes()) for p in paths), index)
    order = sorted_order(index.terms)
    return X[:, order].tocsr(), [p.parent.name for p in paths], [index.terms[i] for i in order]
