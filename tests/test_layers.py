"""Per-user layers: a user's corrections move that user's scores only, and a layered model
equals the site model having learned them."""

from __future__ import annotations

import os

import pytest

from nbspam.errors import ConfigError, UnsafeFileError
from nbspam.mail.messages import Message
from nbspam.service import journalled
from nbspam.service.update import learn
from nbspam.store.layers import layer_path, layered
from nbspam.store.modelfile import load_model
from tests.helpers import SAMPLE, assert_same_model, cli_run

NEW = SAMPLE / "new" / "001.eml"


@pytest.fixture
def users(sample_model, tmp_path):
    folder = tmp_path / "users"
    folder.mkdir()
    return sample_model, str(folder / "%u.nbj")


def test_a_correction_moves_its_users_scores_only(users):
    model, template = users
    site = model.read_bytes()
    before = cli_run("predict", "-m", model, NEW, "-f", "jsonl").stdout
    result = cli_run(
        "learn", "-m", model, "--user", "alice", "--user-models", template, "-l", "ham", NEW
    )
    assert result.exit_code == 0, result.stderr
    assert model.read_bytes() == site and not os.path.exists(f"{model}.journal")
    alice = cli_run("predict", "-m", model, NEW, "-f", "jsonl", "--user", "alice",
                    "--user-models", template)  # fmt: skip
    bob = cli_run("predict", "-m", model, NEW, "-f", "jsonl", "--user", "bob",
                  "--user-models", template)  # fmt: skip
    assert bob.stdout == before == cli_run("predict", "-m", model, NEW, "-f", "jsonl").stdout
    assert alice.stdout != before
    # alice's layer scores exactly as the site model having learned her correction
    message = Message("m", NEW.read_bytes())
    expected, _ = learn(load_model(model), [message], "ham")
    got = layered(load_model(model), template.replace("%u", "alice"))
    assert_same_model(got, expected)
    # forget in her layer takes it out again
    result = cli_run("forget", "-m", model, "--user", "alice", "--user-models", template, NEW)
    assert (result.exit_code, result.stderr) == (0, "forgot 1 message(s)\n")


def test_filter_scores_with_the_layer(users):
    model, template = users
    message = NEW.read_bytes()
    site = cli_run("filter", "-m", model, input=message).stdout_bytes
    site_label = "spam" if b"status: spam" in site.lower() else "ham"
    other = "ham" if site_label == "spam" else "spam"
    journalled.learn(model, [Message("m", message)], other, layer=template.replace("%u", "carol"))
    out = cli_run("filter", "-m", model, "--user", "carol", "--user-models", template,
                  input=message).stdout_bytes  # fmt: skip
    status = [line for line in out.splitlines() if line.startswith(b"X-Nbspam-Status")]
    assert status != [line for line in site.splitlines() if line.startswith(b"X-Nbspam-Status")]


@pytest.mark.parametrize(
    "user", ["../root", "..", ".hidden", "-rf", "a/b", "", "x" * 129, "al ice", "é"]
)
def test_user_names_are_checked_strictly(users, user):
    _, template = users
    with pytest.raises(ConfigError, match="is not a user name nbspam accepts"):
        layer_path(template, user)


def test_templates_are_checked(users, tmp_path):
    _, template = users
    assert layer_path(template, "bob@example.org") == template.replace("%u", "bob@example.org")
    for bad in (str(tmp_path / "users" / "fixed.nbj"), str(tmp_path / "%u" / "x.nbj")):
        with pytest.raises(ConfigError, match="must hold %u once, in its file name"):
            layer_path(bad, "bob")
    with pytest.raises(ConfigError, match="its folder"):
        layer_path(str(tmp_path / "missing" / "%u.nbj"), "bob")


def test_a_folder_of_another_user_is_refused(users, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder away")
    folder = tmp_path / "theirs"
    folder.mkdir()
    os.chown(folder, 4242, 4242)
    with pytest.raises(UnsafeFileError, match="belongs to user 4242"):
        layer_path(str(folder / "%u.nbj"), "bob")


def test_cli_user_options_go_together(sample_model):
    result = cli_run("learn", "-m", sample_model, "-l", "ham", "--user", "bob", NEW)
    assert result.exit_code == 2
    assert "--user needs --user-models TEMPLATE" in result.stderr


def test_a_layer_is_never_written_through_a_link(users, tmp_path):
    model, template = users
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    os.symlink(victim, template.replace("%u", "mallory"))
    result = cli_run(
        "learn", "-m", model, "--user", "mallory", "--user-models", template, "-l", "ham", NEW
    )
    assert result.exit_code == 1
    assert "is a symbolic link" in result.stderr
    assert victim.read_bytes() == b"precious"


def test_a_folder_of_layers_others_may_write_without_the_sticky_bit_is_refused(users, tmp_path):
    model, template = users
    folder = tmp_path / "users"
    folder.chmod(0o777)  # any user could rename another's layer away and put theirs there
    result = cli_run("predict", "-m", model, "--user", "bob", "--user-models", template, NEW)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: --user-models {template!r}: its folder {folder} is writable by others "
        f"without the sticky bit: one user could replace another's file; chmod +t {folder}\n",
    )
    folder.chmod(0o1777)  # as /tmp: each may make a file, none may replace another's
    assert layer_path(template, "bob") == template.replace("%u", "bob")
    if os.geteuid() != 0:
        return
    os.chown(folder, 0, 4700)
    folder.chmod(0o2775)  # the group of the mail users, without the sticky bit
    with pytest.raises(UnsafeFileError) as refused:
        layer_path(template, "bob")
    assert str(refused.value) == (
        f"--user-models {template!r}: its folder {folder} is writable by group 4700 "
        f"without the sticky bit: one user could replace another's file; chmod +t {folder}"
    )


def test_the_help_of_user_models_says_what_its_folder_must_be():
    # the help said only that the folder must belong to root or to you, and the folder
    # an administrator made for every mail user (mode 777) was then refused
    from nbspam.cli.commands import cli

    for name in ("learn", "forget", "predict", "filter", "serve"):
        (option,) = [p for p in cli.commands[name].params if p.name == "user_models"]
        assert option.help.endswith(
            "Its folder must belong to root or to you, with the sticky bit where a group or "
            "others may write it (install -d -m 1777)."
        ), name


def test_a_new_layer_is_written_by_no_group(users):
    model, template = users
    old = os.umask(0o002)
    try:
        result = cli_run(
            "learn", "-m", model, "--user", "bob", "--user-models", template, "-l", "ham", NEW
        )
    finally:
        os.umask(old)
    assert result.exit_code == 0, result.stderr
    assert os.stat(template.replace("%u", "bob")).st_mode & 0o777 == 0o640


def test_a_layer_of_another_user_or_a_group_is_refused(users):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a layer away")
    from nbspam.serve.models import Models

    model, template = users
    args = ["-m", model, "--user", "bob", "--user-models", template]
    assert cli_run("learn", *args, "-l", "ham", NEW).exit_code == 0
    layer = template.replace("%u", "bob")
    os.chown(layer, 4701, -1)  # made by alice before bob had a layer
    error = (
        f"layer {layer}: owned by 4701, not by root: chown it if it is one of yours, else remove it"
    )
    for command in (["predict", *args, NEW], ["learn", *args, "-l", "spam", NEW]):
        result = cli_run(*command)
        assert (result.exit_code, result.stderr) == (1, f"Error: {error}\n")
    with pytest.raises(UnsafeFileError) as refused:  # nbspam serve: EX_TEMPFAIL
        Models(str(model), template).scorer_for("bob")
    assert str(refused.value) == error
    os.chown(layer, 0, 4700)
    os.chmod(layer, 0o660)  # the mail users' group may write it
    result = cli_run("predict", *args, NEW)
    assert (result.exit_code, result.stderr) == (
        1,
        f"Error: layer {layer}: writable by group 4700; chmod g-w {layer}\n",
    )
    os.chmod(layer, 0o640)
    assert cli_run("predict", *args, NEW).exit_code == 0
