"""Settings: YAML loading, validation with clear messages, defaults written out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import nbspam
from nbspam.core.settings import Settings, build_settings, header_style_from, load_yaml
from nbspam.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_configs_default_yaml_writes_out_the_built_in_defaults():
    values = load_yaml(ROOT / "configs" / "default.yaml")
    assert build_settings(values) == Settings()
    assert header_style_from(str(ROOT / "configs" / "default.yaml")) == "nbspam"  # filter's


def test_configs_default_yaml_leaves_auto_the_settings_it_chooses(tmp_path):
    """`train -c configs/default.yaml` trains what `train` does. A setting the file gives
    holds, so the settings auto chooses are comments there, which uncommented are the
    defaults still. Written out, they held: alpha 0.1 gave auto's Bernoulli model alpha
    0.1, not its 0.5, and 4 settings were tried of 10."""
    path = ROOT / "configs" / "default.yaml"
    lines = path.read_text(encoding="utf-8").splitlines()
    commented = [line[2:] for line in lines if re.match(r"# [a-z-]+: ", line)]
    assert len(commented) == 8, commented
    (tmp_path / "uncommented.yaml").write_text("\n".join(commented) + "\n")
    assert build_settings(load_yaml(tmp_path / "uncommented.yaml")) == Settings()

    data = str(ROOT / "sample_data" / "train")
    given, plain = (
        nbspam.train(data, **config).describe() for config in ({"config": str(path)}, {})
    )
    assert given["settings"] == plain["settings"]
    assert given["settings"]["train"]["alpha"] == 0.5
    assert given["history"]["auto"]["candidates"] == plain["history"]["auto"]["candidates"]


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


def test_a_settings_file_others_may_write_is_refused(tmp_path, sample_model_path):
    from tests.helpers import SAMPLE, cli_run

    # a neighbour who may write root's settings names a file of root's as the stop words:
    # its lines would be written into the model, which the neighbour may read
    secret = tmp_path / "secret"
    secret.write_text("root:$6$salt$hash:20000:0:99999:7:::\n")
    config = tmp_path / "settings.yaml"
    config.write_text(f"header-style: spamassassin\nstop-words: {secret}\n")
    config.chmod(0o666)
    model = tmp_path / "m.nbm"
    error = f"Error: config file {config}: writable by others; chmod o-w {config}\n"
    result = cli_run("train", "--event-model", "bernoulli", "-c", config, SAMPLE / "train",
                     "-o", model)  # fmt: skip
    assert (result.exit_code, result.stderr) == (1, error)
    assert not model.exists()
    result = cli_run("filter", "-m", sample_model_path, "-c", config, input=b"Subject: hi\n\nhi\n")
    assert (result.exit_code, result.stderr) == (1, error)
    config.chmod(0o644)
    secret.chmod(0o646)  # and the stop words themselves
    result = cli_run("train", "-c", config, SAMPLE / "train", "-o", model)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: stop-word file {secret}: writable by others; chmod o-w {secret}\n",
    )
    secret.chmod(0o644)
    tmp_path.chmod(0o777)  # anyone could put another file in its place
    result = cli_run("train", "-c", config, SAMPLE / "train", "-o", model)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: config file {config}: its folder {tmp_path} is writable by others without "
        f"the sticky bit; chmod o-w {tmp_path}\n",
    )
    tmp_path.chmod(0o755)


def test_a_settings_file_a_group_may_write_is_refused(tmp_path):
    import os

    from nbspam.errors import UnsafeFileError

    if os.geteuid() != 0:
        pytest.skip("giving a file to a group needs root")
    config = tmp_path / "settings.yaml"
    config.write_text("header-style: spamassassin\n")
    os.chown(config, 0, 4700)
    config.chmod(0o664)
    with pytest.raises(UnsafeFileError) as refused:
        header_style_from(str(config))
    assert str(refused.value) == f"config file {config}: writable by group 4700; chmod g-w {config}"
    config.chmod(0o644)
    assert header_style_from(str(config)) == "spamassassin"


def test_a_group_of_its_owner_alone_may_write_a_settings_file(tmp_path, monkeypatch):
    """Debian's user groups (umask 002): alice's files are alice:alice 664, and no one but
    alice is in the group alice; the group mail has other members."""
    import grp
    import os
    import pwd

    from nbspam.core.trust import check_file
    from nbspam.errors import UnsafeFileError

    users = {
        4701: pwd.struct_passwd(("alice", "x", 4701, 4701, "", "/home/alice", "/bin/sh")),
        4702: pwd.struct_passwd(("bob", "x", 4702, 4800, "", "/home/bob", "/bin/sh")),
    }
    groups = {
        4701: grp.struct_group(("alice", "x", 4701, [])),
        4800: grp.struct_group(("mail", "x", 4800, ["alice"])),
    }
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: users[uid])
    monkeypatch.setattr(pwd, "getpwall", lambda: list(users.values()))
    monkeypatch.setattr(grp, "getgrgid", lambda gid: groups[gid])
    config = tmp_path / "settings.yaml"
    config.write_text("ngrams: 1\n")
    real = os.stat(config)

    def stats(uid: int, gid: int) -> os.stat_result:
        return os.stat_result((0o100664, real.st_ino, real.st_dev, 1, uid, gid, 10, 0, 0, 0))

    check_file(stats(4701, 4701), config, "config file")  # alice's own group
    for uid, gid, name in ((4701, 4800, "mail"), (4702, 4800, "mail"), (4702, 4701, "alice")):
        with pytest.raises(UnsafeFileError, match=f"writable by group {name}; chmod g-w"):
            check_file(stats(uid, gid), config, "config file")
