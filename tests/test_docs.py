"""The documentation covers the commands, options, exit statuses and modules the program has,
the README stays short, every link in the docs leads somewhere, and every command has a
man page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from nbspam.cli.commands import cli
from nbspam.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_SKIPPED, EXIT_USAGE

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md")), *sorted((ROOT / "bench").glob("*.md"))]


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    body = text(path).split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n#{{1,{len(level)}}} ", body, maxsplit=1)[0]


def options(command, *, hidden: bool = True) -> list[str]:
    return [
        max(p.opts, key=len)
        for p in command.params
        if p.param_type_name == "option" and (hidden or not p.hidden)
    ]


def test_every_command_has_help_with_an_example_and_every_option_help():
    for name, command in cli.commands.items():
        assert command.help and "Example:" in command.help, name
        for param in command.params:
            if param.param_type_name == "option":
                assert param.help, f"{name} {param.opts}"


def test_every_command_is_in_the_command_reference_and_the_readme_points_there():
    reference = text(DOCS / "cli.md")
    for name in cli.commands:
        assert f"| `nbspam {name}` |" in reference, name
    assert "(docs/cli.md)" in text(README)


def test_every_train_option_is_in_the_settings_page():
    settings = text(DOCS / "settings.md")
    for long_name in options(cli.commands["train"]):
        assert re.search(rf"`{re.escape(long_name)}[`/ ]", settings), long_name


def test_exit_status_table_matches_the_code():
    rows = re.findall(r"^\| (\d+) \|", section(DOCS / "cli.md", "## Exit status"), re.MULTILINE)
    expected = [EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_SKIPPED, EXIT_INTERRUPTED]
    assert [int(r) for r in rows] == expected


def test_the_cross_validation_row_limit_is_the_one_documented():
    from nbspam.models.model import CV_ROWS

    option = next(p for p in cli.commands["train"].params if "--calibrate" in p.opts)
    assert f"{CV_ROWS:,} messages" in text(DOCS / "training.md")
    assert f"{CV_ROWS:,} messages" in option.help


def test_the_architecture_page_names_every_module():
    layout = section(DOCS / "architecture.md", "## How the code is laid out")
    named = set(re.findall(r"`(\w+)`", layout))
    modules = {p.stem for p in (ROOT / "nbspam").rglob("*.py")} - {"__init__", "__main__"}
    assert modules <= named, sorted(modules - named)


def test_the_readme_is_short_and_starts_with_the_two_commands():
    lines = text(README).splitlines()
    assert len(lines) <= 260, len(lines)
    top = "\n".join(lines[:15])
    assert "make demo" in top and "make test" in top


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but - and _ dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    body = re.sub(r"^```.*?^```", "", text(path), flags=re.MULTILINE | re.DOTALL)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", body, re.MULTILINE)}


def test_slugs_are_githubs():
    assert (
        slug("Choosing the model: `--event-model auto`") == "choosing-the-model---event-model-auto"
    )
    assert slug("Robinson–Fisher combining") == "robinsonfisher-combining"
    assert slug("Learning from IMAP moves: Dovecot's IMAPSieve") == (
        "learning-from-imap-moves-dovecots-imapsieve"
    )


def test_every_relative_link_leads_to_a_file_and_heading_that_exist():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", text(page)):
            if re.match(r"[a-z]+:", target):
                continue  # a URL, not a file of the repository
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists() or ROOT not in resolved.parents:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and (resolved.suffix != ".md" or anchor not in anchors(resolved)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_every_docs_page_is_in_the_readmes_table_of_contents():
    readme = text(README)
    for page in DOCS.glob("*.md"):
        assert f"](docs/{page.name})" in readme, page.name


def test_math_sections_cited_by_the_code_exist():
    headings = set(re.findall(r"^## (.+)$", text(DOCS / "math.md"), re.MULTILINE))
    cited = set()
    for path in [*(ROOT / "nbspam").rglob("*.py"), *(ROOT / "tests").glob("*.py")]:
        cited |= set(re.findall(r'docs/math\.md, "([^"]+)"', text(path)))
        if path.name != "test_docs.py":
            assert "MATH.md" not in text(path), path.name
    assert cited, "no section cited"
    assert cited <= headings, sorted(cited - headings)
    for page in PAGES:
        assert "MATH.md" not in text(page), page.name


@pytest.fixture(scope="module")
def man_pages(tmp_path_factory) -> Path:
    pytest.importorskip("click_man", reason="click-man is one of the test tools")
    folder = tmp_path_factory.mktemp("man")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "man.py"), str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return folder


def test_every_command_has_a_man_page_with_its_help_and_options(man_pages):
    expected = {"nbspam.1"} | {f"nbspam-{name}.1" for name in cli.commands}
    assert {p.name for p in man_pages.iterdir()} == expected
    for name, command in cli.commands.items():
        page = text(man_pages / f"nbspam-{name}.1")
        assert page.startswith(f'.TH "NBSPAM {name.upper()}" "1" '), name
        first = command.help.split("\n", 1)[0]
        assert first.replace("\\", "\\e") in page, name
        for long_name in options(command, hidden=False):
            assert long_name.replace("-", "\\-") in page, f"{name} {long_name}"
        assert ".SH EXIT STATUS" in page and "\\fBnbspam\\fP(1)" in page, name


def test_the_nbspam_man_page_lists_the_commands_and_points_to_the_docs(man_pages):
    page = text(man_pages / "nbspam.1")
    for name in cli.commands:
        assert f"\\fBnbspam-{name}\\fP(1)" in page, name
    see_also = page.split(".SH SEE ALSO\n", 1)[1]
    for doc in ("docs/cli.md", "docs/filtering.md", "docs/math.md", "README.md"):
        assert doc in see_also, doc


def test_help_text_that_looks_like_roff_is_escaped():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        pytest.importorskip("click_man", reason="click-man is one of the test tools")
        from man import roff_text
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert roff_text(".so /etc/passwd\n'x\na\\b") == "\\&.so /etc/passwd\n\\&'x\na\\eb"
    assert roff_text("Example:\n\b\n  nbspam a\n  nbspam b\n\nmore") == (
        "Example:\n.nf\n  nbspam a\n  nbspam b\n.fi\n\nmore"
    )


def test_make_demo_ends_with_commands_to_try_that_work(tmp_path):
    """make demo trains, predicts and explains, then prints what to try next; each nbspam
    command it suggests runs as printed."""
    venv = Path(sys.executable).parent.parent
    if not (venv / ".runtime").exists():
        pytest.skip("make demo runs in the checkout's .venv, made by make test")
    out = tmp_path / "demo"
    result = subprocess.run(
        ["make", "-s", "demo", f"VENV={venv}", f"OUT={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    tail = result.stdout.split("\nTry next", 1)[1].splitlines()[1:]
    assert tail and all(line.startswith("  ") for line in tail), tail
    suggested = [line.split("   #", 1)[0].strip() for line in tail]
    assert f"nbspam info -m {out}/spam.nbm" in suggested
    nbspam = str(venv / "bin" / "nbspam")
    for command in suggested:
        if command.startswith("nbspam "):
            ran = subprocess.run(
                command.replace("nbspam", nbspam, 1),
                shell=True,
                cwd=ROOT,
                capture_output=True,
                timeout=60,
            )
            assert ran.returncode == 0, (command, ran.stderr)


def test_help_and_docstrings_point_to_the_docs_page_that_holds_the_subject():
    """The README is short now: help and docstrings name the page in docs/ instead."""
    pointers = []
    for path in (ROOT / "nbspam").rglob("*.py"):
        pointers += [
            f"{path.name}: {m}"
            for m in re.findall(r"(?:see|\()the README\b|\(README\)", text(path))
        ]
        for page in re.findall(r"\bdocs/([\w-]+\.md)", text(path)):
            assert (DOCS / page).exists(), f"{path.name}: docs/{page}"
    assert not pointers, pointers
    assert "docs/learning.md" in cli.commands["filter"].help
