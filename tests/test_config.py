"""Settings: YAML loading, validation with clear messages, defaults written out."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbspam.core.settings import Settings, build_settings, header_style_from, load_yaml
from nbspam.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_configs_default_yaml_writes_out_the_built_in_defaults():
    values = load_yaml(ROOT / "configs" / "default.yaml")
    assert build_settings(values) == Settings()
    assert header_style_from(str(ROOT / "configs" / "default.yaml")) == "nbspam"  # filter's


def test_bernoulli_config_loads():
    settings = build_settings(load_yaml(ROOT / "configs" / "bernoulli.yaml"))
    assert settings.training.event_model == "bernoulli"


@pytest.mark.parametrize(
    "values, message",
    [
        ({"alpha": -1}, "setting alpha must be a finite number >= 0"),
        ({"alpha": "lots"}, "setting alpha must be a number, not 'lots'"),
        ({"alpha": 1e308}, "setting alpha must be at most 1e\\+100, not 1e\\+308"),
        # yes is no number, where float(True) would make it 1
        ({"alpha": True}, "^setting alpha must be a number, not True$"),
        ({"cost_fp": False}, "^setting cost_fp must be a number, not False$"),
        ({"min_count": 0}, "setting min_count must be a whole number >= 1, not 0"),
        ({"min_count": 2.5}, "setting min_count must be a whole number >= 1"),
        ({"max_df": 1.5}, "setting max_df must be a fraction in \\(0, 1\\]"),
        (
            {"event_model": "gaussian"},
            "setting event_model must be one of auto, multinomial, bernoulli",
        ),
        ({"binary": "yes"}, "setting binary must be true or false"),
        ({"prior": "spam"}, "prior must be fitted, uniform or LABEL=WEIGHT"),
        ({"prior": {"spam": 0, "ham": 1}}, "positive weight for every label"),
        ({"min_length": 5, "max_length": 3}, "max_length must be at least min_length"),
        ({"colour": "red"}, "unknown setting 'colour' in settings"),
        # event_model is the one name of the event model: model names the model file
        ({"model": "bernoulli"}, "unknown setting 'model' in settings"),
        (
            {"event_model": "rennie"},
            "setting event_model must be one of auto, multinomial, bernoulli, fisher, complement, not 'rennie'",
        ),
        ({"complement_norm": 1}, "setting complement_norm must be true or false, not 1"),
        ({"select": "chi2"}, "setting select must be one of frequency, mi, not 'chi2'"),
        ({"select": "mi"}, "setting select mi needs max_features, the number of terms to keep"),
    ],
)
def test_bad_values_are_refused_with_the_reason(values, message):
    with pytest.raises(ConfigError, match=message):
        build_settings(values)


def test_yaml_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_yaml(bad)
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_yaml(bad)
    (tmp_path / "empty.yaml").write_text("")
    assert load_yaml(tmp_path / "empty.yaml") == {}


def test_prior_forms():
    assert build_settings({"prior": "spam=1, ham=3"}).training.prior == (
        ("ham", 3.0),
        ("spam", 1.0),
    )
    assert build_settings({"prior": {"a": 1, "b": 1}}).training.prior == (("a", 1.0), ("b", 1.0))
    assert build_settings({"prior": "uniform"}).training.prior == "uniform"


def test_the_selection_and_complement_settings():
    training = build_settings({"select": "mi", "max_features": 10}).training
    assert (training.select, training.max_features) == ("mi", 10)
    assert build_settings({}).training.select == "frequency"
    training = build_settings({"event_model": "complement", "complement_norm": True}).training
    assert (training.event_model, training.complement_norm) == ("complement", True)
    assert build_settings({}).training.complement_norm is False


@pytest.mark.parametrize("event_model", ["multinomial", "bernoulli", "complement", "fisher"])
def test_the_largest_alpha_still_scores_finitely(event_model):
    """MAX_ALPHA is below where alpha times the terms overflows: its scores are numbers."""
    import math

    import nbspam
    from nbspam.core.settings import MAX_ALPHA

    pairs = [("cheap meds click now", "spam"), ("lunch on thursday", "ham")] * 2
    model = nbspam.train(pairs, alpha=MAX_ALPHA, event_model=event_model, calibrate=False)
    found = model.predict(["cheap lunch", "nothing known"])
    assert all(math.isfinite(p) for one in found for p in one.probabilities)
