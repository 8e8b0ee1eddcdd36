"""The documentation covers the commands, options and exit statuses the program has."""

from __future__ import annotations

import re
from pathlib import Path

from nbspam.cli import cli
from nbspam.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_SKIPPED, EXIT_USAGE

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_command_is_in_the_readme_and_has_help():
    for name, command in cli.commands.items():
        assert f"nbspam {name}" in README, name
        assert command.help and "Example:" in command.help, name
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"{name} {param.opts}"


def test_every_train_option_is_in_the_readme():
    for param in cli.commands["train"].params:
        if param.param_type_name == "option":
            long_name = max(param.opts, key=len)
            assert re.search(rf"`{re.escape(long_name)}[`/ ]", README), long_name


def test_exit_status_table_matches_the_code():
    section = README.split("### Exit status", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| (\d+) \|", section, flags=re.MULTILINE)
    expected = [EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_SKIPPED, EXIT_INTERRUPTED]
    assert [int(r) for r in rows] == expected


def test_the_cross_validation_row_limit_is_the_one_documented():
    from nbspam.model import CV_ROWS

    option = next(p for p in cli.commands["train"].params if "--calibrate" in p.opts)
    assert f"{CV_ROWS:,} messages" in README and f"{CV_ROWS:,} messages" in option.help


def test_the_layout_section_names_every_module():
    section = README.split("## How the code is laid out", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(\w+)`", section))
    package = Path(__file__).resolve().parents[1] / "nbspam"
    modules = {p.stem for p in package.glob("*.py")} - {"__init__", "__main__"}
    assert modules <= named, sorted(modules - named)
