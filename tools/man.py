"""Write the man pages of nbspam and of each of its commands, from the click definitions.

    python tools/man.py DIR

makes DIR/nbspam.1 and DIR/nbspam-COMMAND.1 for every command. click-man lays out each
page (name, synopsis, description, options, commands) from the command's help text and
options; this script gives it the help text as roff (backslashes and control characters at
the start of a line escaped, click's unwrapped \\b blocks kept as they are written) and
adds the sections click-man has no place for: the exit status, and where the full
documentation is.
"""

from __future__ import annotations

import sys
from inspect import cleandoc
from pathlib import Path

import click
from click_man.man import ManPage

from nbspam import __version__
from nbspam.cli.commands import EXIT_STATUS_HELP, cli

DOCS = (
    "The full documentation is in the docs/ folder of nbspam's source, beside README.md: "
    "docs/cli.md (commands, output formats, exit status), docs/reading-mail.md, "
    "docs/training.md, docs/filtering.md (procmail, maildrop, Sieve, cron, Dovecot), "
    "docs/learning.md, docs/evaluation.md, docs/tables.md, docs/settings.md, "
    "docs/model-file.md, docs/scale.md, docs/speed.md, docs/math.md and "
    "docs/architecture.md."
)


def roff_text(text: str) -> str:
    """Plain text as roff: a backslash written as \\e, a line that would start with a
    control character (. or ') guarded by \\&; click's \\b paragraphs kept unwrapped."""
    out: list[str] = []
    verbatim = False
    for line in text.split("\n"):
        if line.strip() == "\b":
            out.append(".nf")
            verbatim = True
            continue
        if verbatim and not line.strip():
            out.append(".fi")
            verbatim = False
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    if verbatim:
        out.append(".fi")
    return "\n".join(out)


def page(ctx: click.Context) -> str:
    """One man page: click-man's sections, then EXIT STATUS and SEE ALSO."""
    command = ctx.command
    man = ManPage(ctx.command_path)
    man.version = __version__
    man.short_help = roff_text(command.get_short_help_str(limit=200))
    man.description = roff_text(cleandoc(command.help or ""))
    man.synopsis = " ".join(command.collect_usage_pieces(ctx))
    man.options = [
        (record[0], roff_text(record[1]))
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
        for record in [param.get_help_record(ctx)]
        if record
    ]
    commands = getattr(command, "commands", {})
    man.commands = [(name, roff_text(sub.get_short_help_str(limit=200))) for name, sub in commands.items()]
    status = cleandoc(EXIT_STATUS_HELP.replace("\b", "")).replace("Exit status: ", "", 1)
    if ctx.command_path == "nbspam":
        others = ", ".join(f"\\fBnbspam-{name}\\fP(1)" for name in commands)
        see_also = f"{others}.\n.PP\n{DOCS}"
    else:
        see_also = f"\\fBnbspam\\fP(1).\n.PP\n{DOCS}"
    return (
        str(man)
        + f".SH EXIT STATUS\n{roff_text(status)}\n"
        + f".SH SEE ALSO\n{see_also}\n"
    )


def write_pages(target: Path) -> list[Path]:
    """Write nbspam.1 and nbspam-COMMAND.1 into ``target``; return their paths."""
    target.mkdir(parents=True, exist_ok=True)
    root = click.Context(cli, info_name="nbspam")
    contexts = [root] + [
        click.Context(command, info_name=name, parent=root)
        for name, command in cli.commands.items()
        if not command.hidden
    ]
    written = []
    for ctx in contexts:
        path = target / (ctx.command_path.replace(" ", "-") + ".1")
        path.write_text(page(ctx), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/man.py DIR")
    for path in write_pages(Path(sys.argv[1])):
        print(path)
