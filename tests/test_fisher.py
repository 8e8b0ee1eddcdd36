"""Robinson–Fisher combining against docs/math.md: hand-computed values and scipy as an oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from nbspam.models import fisher
from nbspam.models.fisher import (
    BACKGROUND,
    STRENGTH,
    fisher_log_odds,
    fisher_log_odds_many,
    is_clue,
    log_chi2_cdf,
    log_chi2_sf,
    word_probabilities,
)
from tests.helpers import SAMPLE


def test_word_probabilities_by_hand():
    # rows: ham (0), spam (1); 20 ham and 10 spam messages
    doc_count = np.array([[1, 0, 5, 0], [3, 2, 0, 0]])
    class_count = np.array([20, 10])
    f = word_probabilities(doc_count, class_count, positive=1)
    s, x = STRENGTH, BACKGROUND
    p = (3 / 10) / (3 / 10 + 1 / 20)  # the first word: in 3 of 10 spam, 1 of 20 ham
    assert f[0] == pytest.approx((s * x + 4 * p) / (s + 4))
    assert f[1] == pytest.approx((s * x + 2 * 1.0) / (s + 2))  # spam only
    assert f[2] == pytest.approx((s * x + 5 * 0.0) / (s + 5))  # ham only
    assert f[3] == pytest.approx(x)  # in no message: the background
    # the positive class's row decides the direction
    flipped = word_probabilities(doc_count[::-1], class_count[::-1], positive=0)
    np.testing.assert_array_equal(flipped, f)


def test_clues_are_the_words_far_from_one_half():
    assert is_clue(0.875) and is_clue(0.125) and not is_clue(0.87) and not is_clue(0.52)
    assert is_clue(0.5, min_dev=0.0)


@pytest.mark.parametrize("m", [0.01, 0.5, 3.0, 40.0, 300.0, 495.0, 520.0])
@pytest.mark.parametrize("k", [1, 2, 5, 40, 500])
def test_the_tails_agree_with_scipy(m, k):
    sf = chi2.sf(2 * m, 2 * k)
    if sf > 1e-300:
        assert log_chi2_sf(m, k) == pytest.approx(math.log(sf), rel=1e-9, abs=1e-12)
    cdf = chi2.cdf(2 * m, 2 * k)
    if cdf > 1e-300:
        assert log_chi2_cdf(m, k) == pytest.approx(math.log(cdf), rel=1e-9, abs=1e-12)


def test_the_tails_by_hand_for_two_and_four_degrees():
    # Q(2m, 2) = e^-m and Q(2m, 4) = e^-m (1 + m)
    assert log_chi2_sf(3.0, 1) == pytest.approx(-3.0)
    assert log_chi2_sf(3.0, 2) == pytest.approx(-3.0 + math.log(4.0))
    # far beyond float64 the log is still exact
    assert log_chi2_sf(5000.0, 1) == pytest.approx(-5000.0)
    assert math.isfinite(log_chi2_cdf(0.001, 300)) and log_chi2_cdf(0.001, 300) < -1000


@pytest.mark.parametrize("f", [0.01, 0.2, 0.5, 0.9, 0.999])
def test_one_clue_scores_its_own_probability(f):
    # with k = 1: H = f, S = 1 - f, so I = f and logit(I) = logit(f)
    assert fisher_log_odds(math.log(f), math.log1p(-f), 1) == pytest.approx(
        math.log(f / (1 - f)), abs=1e-12
    )


def test_no_clue_is_one_half_and_swapping_the_classes_negates():
    assert fisher_log_odds(0.0, 0.0, 0) == 0.0
    fs = [0.99, 0.95, 0.02, 0.97]
    spam = sum(map(math.log, fs)), sum(math.log1p(-f) for f in fs)
    assert fisher_log_odds(*spam, 4) == pytest.approx(-fisher_log_odds(spam[1], spam[0], 4))


def test_the_score_keeps_its_order_where_I_saturates():
    # 60 and 80 clues of f = 0.999: I rounds to 1.0 for both, logit(I) still ranks them
    scores = []
    for k in (60, 80):
        sums = k * math.log(0.999), k * math.log1p(-0.999)
        h, s = chi2.sf(-2 * sums[0], 2 * k), chi2.sf(-2 * sums[1], 2 * k)
        assert (1 + h - s) / 2 == 1.0
        scores.append(fisher_log_odds(*sums, k))
    assert math.isfinite(scores[1]) and scores[1] > scores[0] > 30


def test_logit_i_matches_the_direct_formula_where_it_does_not_saturate():
    fs = [0.9, 0.2, 0.95, 0.7, 0.99, 0.05]
    k = len(fs)
    sum_f, sum_not = sum(map(math.log, fs)), sum(math.log1p(-f) for f in fs)
    h, s = chi2.sf(-2 * sum_f, 2 * k), chi2.sf(-2 * sum_not, 2 * k)
    i = (1 + h - s) / 2
    assert fisher_log_odds(sum_f, sum_not, k) == pytest.approx(math.log(i / (1 - i)), rel=1e-9)


def test_many_messages_at_once_score_as_each_alone_to_the_bit(monkeypatch):
    """`fisher_log_odds_many` (training's cross-validation, batch scoring) gives each message
    the log-odds of `fisher_log_odds` (the one-message path), to the bit: no clue, a clue
    of f = 1/2, few and many clues, sums far beyond float64's exp, the lower tail summed
    (Q > 1/2) and taken as log1p(-Q)."""
    rng = np.random.default_rng(7)
    n = 3000
    clues = rng.integers(1, 400, n)
    clues[:300] = rng.integers(1, 4, 300)
    per_clue = rng.choice([0.01, 0.3, 0.7, 2.0, 9.0], (2, n))
    sums = -rng.random((2, n)) * clues * per_clue
    clues[:5] = 0
    sums[:, 5:10] = 0.0
    sums[:, 10] = (-5000.0, -1e-3)
    sums[:, 11] = (math.log(0.5), math.log(0.5))
    clues[11] = 1
    got = fisher_log_odds_many(sums[0], sums[1], clues)
    want = [fisher_log_odds(a, b, int(k)) for a, b, k in zip(sums[0], sums[1], clues)]
    assert got.tolist() == want
    assert got[:10].tolist() == [0.0] * 10
    # the same in blocks of at most 16 steps of each message (the memory bound)
    monkeypatch.setattr(fisher, "_BLOCK", 64)
    assert fisher_log_odds_many(sums[0], sums[1], clues).tolist() == want
    assert fisher_log_odds_many(np.zeros(0), np.zeros(0), np.zeros(0, int)).size == 0


@pytest.mark.parametrize("m", [0.01, 0.5, 3.0, 40.0, 300.0, 495.0, 520.0])
def test_many_tails_agree_with_scipy(m):
    ks = np.array([1, 2, 5, 40, 500])
    many = fisher_log_odds_many(np.full(5, -m), np.full(5, -m / 3), ks)
    for k, got in zip(ks.tolist(), many.tolist()):
        h, s = chi2.sf(2 * m, 2 * k), chi2.sf(2 * m / 3, 2 * k)
        ln_i = math.log((1 + h - s) / 2) if (1 + h - s) / 2 > 1e-300 else None
        ln_not_i = math.log((1 - h + s) / 2) if (1 - h + s) / 2 > 1e-300 else None
        if ln_i is not None and ln_not_i is not None and abs(ln_i - ln_not_i) < 30:
            assert got == pytest.approx(ln_i - ln_not_i, rel=1e-9, abs=1e-9), k


# -- the fisher event model ---------------------------------------------------------------


@pytest.fixture(scope="module")
def fisher_path(sample_models):
    return sample_models("--event-model", "fisher")


def _by_hand(model, tokens):
    """logit(I) of a message from docs/math.md: f of every vocabulary word from the counts, the
    message's distinct words that are clues, the two sums, Fisher's tails."""
    cfg = model.training
    f = word_probabilities(
        model.doc_count,
        model.class_count,
        positive=model.positive_index,
        strength=cfg.strength,
        background=cfg.background,
    )
    where = {t: i for i, t in enumerate(model.terms)}
    clues = [f[where[t]] for t in dict.fromkeys(tokens) if t in where]
    clues = [p for p in clues if is_clue(p, cfg.min_dev)]
    sum_f = math.fsum(math.log(p) for p in clues)
    sum_not = math.fsum(math.log1p(-p) for p in clues)
    return fisher_log_odds(sum_f, sum_not, len(clues))


def test_predict_scores_as_math_md_says(fisher_path):
    from nbspam.mail.message import Problems
    from nbspam.mail.messages import read_messages
    from nbspam.models.model import score
    from nbspam.store.modelfile import load_model
    from nbspam.text.features import Analyzer

    model = load_model(fisher_path)
    assert model.training.event_model == "fisher"
    analyzer = Analyzer(model.tokenizer)
    messages = list(read_messages([str(SAMPLE / "new")], Problems()))
    for p, m in zip(score(model, messages), messages):
        assert p.log_odds == pytest.approx(_by_hand(model, analyzer.tokens(m.data)), abs=1e-9)
        assert math.fsum(p.probabilities) == pytest.approx(1.0)


def test_explain_shows_how_the_score_follows_from_the_clues(fisher_path):
    from nbspam.mail.message import Message
    from nbspam.models.explain import explain_message
    from nbspam.models.model import score
    from nbspam.store.modelfile import load_model
    from nbspam.text.features import Analyzer

    model = load_model(fisher_path)
    data = (SAMPLE / "new" / "002.eml").read_bytes()
    e = explain_message(model, "m", Analyzer(model.tokenizer).tokens(data))
    (predicted,) = score(model, [Message("m", data)])
    assert e.log_odds == predicted.log_odds
    assert e.sum_log_f == pytest.approx(math.fsum(c.log_f for c in e.clues))
    assert e.sum_log_not_f == pytest.approx(math.fsum(c.log_not_f for c in e.clues))
    k = len(e.clues)
    assert fisher_log_odds(e.sum_log_f, e.sum_log_not_f, k) == pytest.approx(e.log_odds, abs=1e-9)
    assert e.log_h == pytest.approx(log_chi2_sf(-e.sum_log_f, k))
    assert all(is_clue(c.f) for c in e.clues)


def test_one_message_on_stdin_scores_as_the_batch(fisher_path):
    from tests.helpers import nbspam_process

    data = (SAMPLE / "new" / "002.eml").read_bytes()
    one = nbspam_process("predict", "-m", fisher_path, "-f", "jsonl", stdin=data)
    batch = nbspam_process("predict", "-m", fisher_path, SAMPLE / "new" / "002.eml", "-f", "jsonl")
    assert one.returncode == batch.returncode == 0, one.stderr
    import json

    assert json.loads(one.stdout)["log_odds"] == json.loads(batch.stdout)["log_odds"]


def test_fisher_needs_two_labels(tmp_path):
    from tests.helpers import cli_run

    for label in ("ham", "spam", "other"):
        (tmp_path / "data" / label).mkdir(parents=True)
        (tmp_path / "data" / label / "1.txt").write_text(f"words of {label} and more")
    result = cli_run(
        "train", tmp_path / "data", "-o", tmp_path / "m.nbm", "--event-model", "fisher"
    )
    assert result.exit_code == 1
    assert result.stderr == "Error: the fisher event model needs two labels, not 3\n"


def test_learn_then_forget_gives_back_the_fisher_model(fisher_path, tmp_path):
    from nbspam.store.modelfile import load_model
    from tests.helpers import assert_same_model, cli_run

    copy = tmp_path / "m.nbm"
    copy.write_bytes(fisher_path.read_bytes())
    message = SAMPLE / "new" / "002.eml"
    assert cli_run("learn", "-m", copy, "-l", "ham", message).exit_code == 0
    assert load_model(copy).form.kept.size > 0
    assert cli_run("forget", "-m", copy, message).exit_code == 0
    assert_same_model(load_model(copy), load_model(fisher_path))


@pytest.mark.corpus
@pytest.mark.slow
def test_fisher_ranks_spamassassin_as_bogofilter_does(spamassassin_matrix):
    from nbspam.core.settings import build_settings
    from nbspam.fit import metrics
    from nbspam.fit.crossval import Tokenized, cross_validate_matrix

    X, labels, terms = spamassassin_matrix
    data = Tokenized([str(i) for i in range(len(labels))], labels, X, terms)
    settings = build_settings({"event_model": "fisher"})
    scores = cross_validate_matrix(data, settings, folds=5, seed=42)
    positive = np.array(labels, dtype=object) == "spam"
    auc = metrics.roc_auc(scores.log_odds, positive)
    # (1-ROCA)% 0.032 with the PEERS folds (bench/cv.py), bogofilter 0.030; multinomial 0.092
    assert 100 * (1 - auc) < 0.045


def test_info_shows_the_fisher_settings(fisher_path):
    from tests.helpers import cli_run

    result = cli_run("info", "-m", fisher_path)
    assert "settings:   fisher (strength 0.1, background 0.52, min-dev 0.375), min-count 1\n" in (
        result.stdout
    )


def test_a_message_without_clues_is_explained_as_one_half(fisher_path):
    from tests.helpers import cli_run

    result = cli_run("explain", "-m", fisher_path, "-", input=b"qqqq zzzz")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == [
        f"  {'f':>8}  {'ln f':>9}  {'ln(1-f)':>9}  term",
        "  no clue: I = 1/2, logit(I) = 0 (2 tokens are no clue)",
    ]


def test_an_infinite_sum_of_logs_ends_and_scores_as_its_limit():
    # a word with f = 1.0 exactly (counts in the 10^17s) has ln(1 - f) = -inf: the spam
    # statistic is infinite, its tail 0; the many-message scorer looped for ever on it
    import subprocess
    import sys

    code = (
        "import math, numpy as np\n"
        "from nbspam.models.fisher import fisher_log_odds, fisher_log_odds_many\n"
        "many = fisher_log_odds_many(np.array([-1.0, -math.inf]),"
        " np.array([-math.inf, -math.inf]), np.array([1, 3]))\n"
        "print(many.tolist(), fisher_log_odds(-1.0, -math.inf, 1))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    many, one = done.stdout.rsplit("] ", 1)
    expected = math.log((1 + math.exp(-1)) / (1 - math.exp(-1)))  # H = e^-1, S = 0
    first, both = (float(v) for v in many.strip("[").split(","))
    assert math.isclose(first, expected, rel_tol=1e-12) and float(one) == first
    assert both == 0.0  # both statistics infinite: I = 1/2


def test_many_messages_are_scored_within_the_block_of_terms():
    # 2^18 terms of 8 bytes a block: a few such arrays at a time whatever the number of
    # messages; 200,000 messages at 16 steps each held 25.6 MB an array
    import tracemalloc

    n = 200_000
    sums = np.full(n, -100.0)
    clues = np.full(n, 100)
    tracemalloc.start()
    try:
        many = fisher_log_odds_many(sums, sums, clues)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert many.tolist() == [fisher_log_odds(-100.0, -100.0, 100)] * n
    # the inputs and the result (n floats, 1.6 MB each) and the blocks' arrays
    assert peak < 40_000_000
