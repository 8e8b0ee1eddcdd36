"""The command line: thin click commands over the library; errors and exit statuses here."""

from __future__ import annotations

import errno
import io
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import click

from .. import __version__
from ..core.settings import (
    AUTO,
    EVENT_MODELS,
    MAIL_MODES,
    MAX_BINS,
    MAX_JOBS,
    SELECTIONS,
    WORD_PAIRS,
    TrainConfig,
)
from ..errors import EXIT_SKIPPED, NbspamError
from .boundary import failure
from .output import output_error
from .printable import printable

EXIT_STATUS_HELP = """\b
Exit status: 0 success; 1 an error in the input or the model (one line
"Error: ..." on stderr); 2 a usage error; 3 done, but some inputs could not
be read, held no message or were binary data, and were skipped (each
reported as "PATH: reason" on stderr); 130 interrupted (Ctrl-C)."""


class Group(click.Group):
    """Every command's failures go through `boundary.failure`: one line on stderr and an
    exit status. Click's own (usage errors, --help, an exit) stay click's."""

    def invoke(self, ctx: click.Context) -> Any:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                return super().invoke(ctx)
            except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
                raise
            except BaseException as error:
                status = failure(error)
                if status is None:
                    raise
                sys.exit(status)


def emit(line: str) -> None:
    """One line of data on stdout. A write that fails (a full disk, a closed stdout) is one
    error line naming the output; a reader that went away (EPIPE) is left to click."""
    try:
        click.echo(line)
    except OSError as error:
        if error.errno == errno.EPIPE:
            raise
        raise NbspamError(output_error(error, stdout=True)) from None


EMIT_LINES = 64  # lines of data written at once by `emit_lines`


def emit_lines(blocks: Iterable[tuple[str, int]], each: Callable[[int], None]) -> None:
    """Lines of data on stdout, as `emit` writes them, each given as (text, rows): single
    lines `EMIT_LINES` at a time (click.echo flushes what it writes and asks whether the
    output is a terminal, two system calls a line, more than scoring a short text takes),
    a block of many lines (a table's rows) at once. ``each`` is called with the rows of
    each line or block once made; the lines made before an error are written before it
    goes on."""
    batch: list[str] = []
    try:
        for text, rows in blocks:
            batch.append(text)
            each(rows)
            if len(batch) == EMIT_LINES or rows > 1:
                text = "\n".join(batch)
                batch.clear()
                emit(text)
    finally:
        if batch:
            emit("\n".join(batch))


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    click.echo(f"Warning: {message}", err=True)


@click.group(
    cls=Group, epilog=EXIT_STATUS_HELP, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(__version__, prog_name="nbspam")
def cli() -> None:
    """Naive Bayes spam and text classifier.

    Train a model on labelled messages, score new ones, and see why.

    \b
    Example:
      nbspam train sample_data/train -o spam.nbm
      nbspam predict -m spam.nbm sample_data/new
      nbspam explain -m spam.nbm --top 10
      nbspam explain -m spam.nbm sample_data/new/001.eml
    """


class Reporter:
    """Talk on stderr: skipped inputs as they happen, and progress (`progress.Meter`) of
    the messages read and of the library's stages, for as long as the command runs."""

    def __init__(self, verb: str) -> None:
        from ..core.progress import listening
        from ..mail.message import Problems
        from .progress import Meter

        self.verb = verb
        self.counted = False  # whether `read` counts the messages
        self.total: int | Callable[[], int | None] | None = None  # the bytes counted against
        self.noun = "messages"  # what `progress` counts
        self.meter = Meter(sys.stderr, terminal=sys.stderr.isatty(), quiet=quiet())
        self.problems = Problems(self.line)
        ctx = click.get_current_context(silent=True)
        if ctx is not None and self.meter.mode != "off":
            ctx.with_resource(listening(self.meter))
            ctx.call_on_close(self.meter.clear)  # before an error line, even on Ctrl-C

    def line(self, text: str) -> None:
        if text.startswith("note: ") and quiet():
            return
        self.meter.clear()
        click.echo(printable(text), err=True)

    def read(
        self, messages: Iterable[Any], total: int | Callable[[], int | None] | None
    ) -> Iterator[Any]:
        """The ``messages`` as they come, their progress shown against ``total`` bytes
        (`extent.input_bytes`; a function that lists them, as `_input_bytes` gives)."""
        self.counted = True
        return self.meter.reading(messages, total, self.verb)

    def watch(self, messages: Iterable[Any]) -> Iterator[Any]:
        """`read` against the `total` bytes."""
        return self.read(messages, self.total)

    def progress(self, n: int, size: int = 0) -> None:
        """``n`` more messages done (of ``size`` bytes), for a command whose messages
        `read` does not count (against the `total` bytes, where given)."""
        if self.counted:
            return
        if self.meter.what is None:
            self.meter.begin(self.verb, self.total, noun=self.noun)
        self.meter.advance(size, n)

    def finish(self) -> int:
        """Clear the progress line, say how many inputs were skipped; return the exit status."""
        self.meter.end()
        skipped = self.problems.skipped
        if skipped > 1:  # one skip is its own line; more get a count
            click.echo(f"{skipped} inputs skipped, see above", err=True)
        return EXIT_SKIPPED if skipped else 0


QUIET = "nbspam.quiet"


def _set_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    ctx.meta[QUIET] = value


def quiet_option(f):
    """-q/--quiet: nothing on stderr but errors and skipped inputs."""
    return click.option(
        "-q",
        "--quiet",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_quiet,
        help="Print nothing on stderr but errors and skipped inputs: no progress, no summary "
        "(cron mails whatever a job prints).",
    )(f)


def quiet() -> bool:
    """Whether the command runs with -q."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get(QUIET))


def say(line: str) -> None:
    """A line for people on stderr (a summary, a note), unless -q."""
    if not quiet():
        click.echo(line, err=True)


def _model_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """-m as given, else the default model, which must exist."""
    if value is not None:
        return value
    from ..store.home import DEFAULT_MODEL_HELP, default_model_path

    path = default_model_path()
    if not os.path.lexists(path):
        raise NbspamError(
            f"no model at {path} ({DEFAULT_MODEL_HELP}): give -m MODEL, or train one there "
            "with 'nbspam train DATA'"
        )
    return path


def model_option(f):
    from ..store.home import DEFAULT_MODEL_HELP

    return click.option(
        "-m",
        "--model",
        "model_path",
        callback=_model_path,
        type=click.Path(),  # a folder, like any special file, is refused in one line
        help=f"Model file written by 'nbspam train'. [default: {DEFAULT_MODEL_HELP}]",
    )(f)


def user_options(f):
    """--user NAME and --user-models TEMPLATE: a user's layer over the site model."""
    f = click.option(
        "--user-models",
        "user_models",
        metavar="TEMPLATE",
        envvar="NBSPAM_USER_MODELS",
        help="Where users' layers are: a path whose file name holds %u, the user name "
        "(e.g. /var/lib/nbspam/users/%u.nbj; or $NBSPAM_USER_MODELS). Its folder must belong "
        "to root or to you, with the sticky bit where a group or others may write it "
        "(install -d -m 1777).",
    )(f)
    return click.option(
        "--user",
        metavar="NAME",
        help="Use NAME's layer over the model (see --user-models): learn and forget change "
        "only that layer, predict and filter score with the model plus the layer.",
    )(f)


def _layer(user: str | None, user_models: str | None) -> str | None:
    """The layer file of --user by --user-models, or None without --user."""
    if user is None:
        if user_models is not None:
            raise click.UsageError("--user-models needs --user")
        return None
    if user_models is None:
        raise click.UsageError("--user needs --user-models TEMPLATE (or $NBSPAM_USER_MODELS)")
    from ..store.layers import layer_path

    return layer_path(user_models, user)


def autolearn_options(when: str):
    """--autolearn-spam and --autolearn-ham, the thresholds of autolearn on the calibrated
    probability; ``when`` names the option that uses them."""

    def decorate(f):
        f = click.option(
            "--autolearn-ham",
            type=click.FloatRange(0, 0.5, max_open=True),
            default=0.001,
            show_default=True,
            help=f"{when}: learn as ham at this calibrated probability or below.",
        )(f)
        return click.option(
            "--autolearn-spam",
            type=click.FloatRange(0.5, 1, min_open=True),
            default=0.999,
            show_default=True,
            help=f"{when}: learn as spam at this calibrated probability or above.",
        )(f)

    return decorate


def _output_model_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """-o as given, else the default model, its folder made if missing."""
    if value is not None:
        return value
    from ..store.home import default_model_path, make_default_folder

    make_default_folder()
    return default_model_path()


def output_model_option(what: str = "the model file", *, default: bool = True):
    """-o/--output: where a command that makes a model writes it; by default (``default``)
    the default model."""
    from ..store.home import DEFAULT_MODEL_HELP

    more = f" [default: {DEFAULT_MODEL_HELP}]" if default else ""
    return click.option(
        "-o",
        "--output",
        required=not default,
        callback=_output_model_path if default else None,
        type=click.Path(),
        help=f"Where to write {what} (replaced atomically).{more}",
    )


class FormatChoice(click.Choice):
    """A --format whose ``aliases`` name the same format another way: json and jsonl are one
    format where a command has only one of them."""

    def __init__(self, choices: list[str], aliases: dict[str, str]) -> None:
        super().__init__(choices)
        self.aliases = aliases

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(self.aliases.get(value, value), param, ctx)


def format_option(choices: list[str], help: str, *, aliases: dict[str, str] | None = None):
    """-f/--format with these choices (and ``aliases``), text the default."""
    return click.option(
        "-f",
        "--format",
        "fmt",
        type=FormatChoice(choices, aliases or {}),
        default="text",
        show_default=True,
        help=help,
    )


MESSAGE_FORMATS = format_option(
    ["text", "jsonl", "tsv"],  # as fast_start.FORMATS, which serves one message without click
    "Output format: text for people, jsonl (json is the same) or tsv for programs.",
    aliases={"json": "jsonl"},
)


def default_jobs() -> int:
    """The number of processor cores this process may use (at most `MAX_JOBS`)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return min(cores, MAX_JOBS)


def jobs_option(f):
    return click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=1, max=MAX_JOBS),
        default=default_jobs,
        show_default="the number of cores",
        help="Worker processes that parse and tokenize messages; any number gives the same result.",
    )(f)


def files_from_options(f):
    f = click.option(
        "-0",
        "--null",
        is_flag=True,
        help="With --files-from: paths are separated by NUL characters, not line breaks.",
    )(f)
    return click.option(
        "--files-from",
        type=click.File("rb"),
        metavar="FILE|-",
        help="Read more paths from FILE, one per line ('-' for stdin); each is a file name, "
        "never a glob or a URL.",
    )(f)


def follow_links_option(f):
    return click.option(
        "--follow-links",
        is_flag=True,
        help="Inside a folder, follow symbolic links that lead out of it too (never into "
        "/proc, /sys or /dev). Without it such a link is reported and skipped; a link that "
        "stays inside the folder is always followed.",
    )(f)


def literal_paths_option(f):
    return click.option(
        "--literal-paths",
        is_flag=True,
        envvar="NBSPAM_LITERAL_PATHS",
        show_envvar=True,
        help="Read every PATH as a file name: no glob patterns, no URLs (s3://, gs://, az://, "
        "http(s)://).",
    )(f)


def path_options(f):
    """--follow-links and --literal-paths, for the commands that read messages."""
    return follow_links_option(literal_paths_option(f))


_DEFAULT_TRAIN = TrainConfig()


def table_options(f):
    """The options of typed tables (`tables`), for train and evaluate."""
    f = click.option(
        "--binning",
        type=click.Choice(["quantile", "uniform"]),
        default="quantile",
        show_default=True,
        help="Tables: how --bins cuts a continuous column: quantile (zero a bin of its own where the column holds zeros, the rest at its quantiles) or uniform (equal widths).",
    )(f)
    f = click.option(
        "--bins",
        type=click.IntRange(min=1, max=MAX_BINS),
        help="Tables: cut every continuous column into N bins, modelled as categories (edges learned in training).",
    )(f)
    f = click.option(
        "--column",
        "column_kinds",
        multiple=True,
        metavar="NAME=KIND",
        help="Tables: how to model a column: gaussian, categorical, binned (cut into --bins bins, else 4), bernoulli (x > 0), text or ignore (repeatable; NAME may be a pattern, '*=gaussian'). [default: detected]",
    )(f)
    return click.option(
        "--label-column",
        metavar="NAME",
        help="Tables: the column that holds the label; DATA is then read as a typed table. [default: label]",
    )(f)


def _table(options: dict[str, Any]) -> dict[str, Any]:
    """The options of a training command as `api.train` takes them: --column as columns."""
    options = dict(options)
    options["columns"] = options.pop("column_kinds")
    return options


def _one_malloc_arena() -> None:
    """glibc's malloc serves this program's threads from one heap (``M_ARENA_MAX`` 1): a
    training's worker pool reads the workers' results in threads of its own, and each
    thread's heap of its own kept the chunks freed there, a dozen MB that no later array
    used (docs/speed.md, "Memory"). Set by the command, not the library: it is a setting
    of the whole process, for a program that imports nbspam to make (and it stays set in a
    program that runs this command itself). Nothing but on Linux, and nothing where malloc
    is not glibc's (musl has no arenas to set)."""
    if not sys.platform.startswith("linux"):  # Windows cannot open the program itself
        return
    import ctypes

    try:
        ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX (malloc.h)
    except (OSError, AttributeError):
        pass


def train_options(f):
    """The options of `train`, shared by every command that trains (train, evaluate)."""
    for option in reversed(_TRAIN_OPTIONS):
        f = option(f)
    return f


_TRAIN_OPTIONS = [
    click.option(
        "--event-model",
        "event_model",
        type=click.Choice((AUTO, *EVENT_MODELS)),
        help=f"Event model: auto tries the others (with a few alphas, then with stop words left out and with rare words left out) by internal cross-validation of the training messages and keeps the one of best ROC AUC, which train prints and info shows (a setting given, such as --alpha, is held, not tried otherwise); multinomial counts words, bernoulli their presence and absence, fisher combines each word's spam probability by Fisher's method (two labels), complement weighs each label by the words of all the other labels, with no prior (try it where the labels are many or unbalanced). [default: {_DEFAULT_TRAIN.event_model}]",
    ),
    click.option(
        "--strength",
        type=float,
        help=f"fisher: Robinson's strength s of the background x in each word's spam probability. [default: {_DEFAULT_TRAIN.strength:g}]",
    ),
    click.option(
        "--background",
        type=float,
        help=f"fisher: the background x, the spam probability of a word no message holds. [default: {_DEFAULT_TRAIN.background:g}]",
    ),
    click.option(
        "--min-dev",
        type=float,
        help=f"fisher: words count only where their spam probability is this far from 0.5. [default: {_DEFAULT_TRAIN.min_dev:g}]",
    ),
    click.option(
        "--complement-norm/--no-complement-norm",
        "complement_norm",
        default=None,
        help="complement: divide each label's weights by the sum of their sizes, so that no label wins by having larger weights overall (Rennie's weight normalisation); compare both ways with 'nbspam evaluate'. [default: --no-complement-norm]",
    ),
    click.option(
        "--alpha",
        type=float,
        help=f"Smoothing: 1 is Laplace, 0 < alpha < 1 Lidstone, 0 maximum likelihood. [default: {_DEFAULT_TRAIN.alpha:g}]",
    ),
    click.option(
        "--prior",
        help="Class prior (complement has none): fitted (class frequencies), uniform, or LABEL=WEIGHT,... [default: fitted]",
    ),
    click.option(
        "--min-count",
        type=int,
        help=f"Keep words found in at least this many training messages. [default: {_DEFAULT_TRAIN.min_count}]",
    ),
    click.option(
        "--max-df",
        type=float,
        help="Drop words found in more than this fraction of messages. [default: 1.0]",
    ),
    click.option(
        "--max-features",
        type=int,
        help="Keep only N words: those found in most messages, or with --select mi the most informative. [default: all]",
    ),
    click.option(
        "--select",
        type=click.Choice(SELECTIONS),
        help="How --max-features picks its words: frequency keeps those in most messages, mi those whose presence says most about the label (mutual information); mi suits a hard cut, where frequent words say little. [default: frequency]",
    ),
    click.option(
        "--stop-words",
        metavar="english|none|FILE",
        help="Words the model leaves out (and word n-grams holding one): the built-in English list, none, or a file with one word per line. They are still counted, so where this is not given auto tries the model with the English ones left out; a list given is held. [default: none]",
    ),
    click.option(
        "--ngrams",
        type=int,
        help="Also count word n-grams up to this length (2 adds word pairs). [default: 1]",
    ),
    click.option(
        "--word-pairs",
        type=click.Choice(WORD_PAIRS),
        help="Also count each two adjacent words, hashed into --pair-buckets buckets: none, those of the subject and headers (cheap: headers are short), or all, the body's too (tokenizing takes about twice as long). Where this is not given, auto also tries the model without them. [default: headers]",
    ),
    click.option(
        "--pair-buckets",
        type=int,
        metavar="BUCKETS",
        help="How many buckets --word-pairs hashes the pairs into: the vocabulary grows by at most this many terms per header, where --ngrams 2 grows it fivefold. [default: 1048576]",
    ),
    click.option(
        "--binary/--counts",
        "binary",
        default=None,
        help="Multinomial and complement models: count each word once per message (--binary) or every time (--counts). [default: --binary]",
    ),
    click.option(
        "--mail",
        type=click.Choice(MAIL_MODES),
        help="Parse input as e-mail: auto (when it looks like mail), always, never. [default: auto]",
    ),
    click.option(
        "--positive",
        help="Two-class models: the label log-odds point to. [default: spam, else the label that sorts last; a typed table: spam, else 1, else the label that sorts last]",
    ),
    click.option(
        "--calibrate/--no-calibrate",
        default=None,
        help="Two-class models: fit cutoffs and a calibration by internal cross-validation (of at most 10,000 messages' count rows, a sample of more). [default: --calibrate]",
    ),
    click.option(
        "--target-fpr",
        metavar="RATE|none",
        help="The ham false-positive rate the spam cutoff holds out of sample: its upper bound at 80% confidence, plus a margin for drift; the ham cutoff by --cost-fn and --cost-unsure below it. 'none': the cutoffs of least cost. [default: 0.001; a typed table: none]",
    ),
    click.option(
        "--cost-fp",
        type=float,
        help="Cost of a false positive when choosing cutoffs by cost (--target-fpr none). [default: 15, a lost ham being worse than a spam let through; a typed table: 1]",
    ),
    click.option("--cost-fn", type=float, help="Cost of a false negative. [default: 1]"),
    click.option(
        "--cost-unsure",
        type=float,
        help="Cost of an unsure verdict. [default: 0.5; a typed table: 1/3, unsure only where the odds are below 2 to 1]",
    ),
    click.option(
        "--cutoffs",
        metavar="HAM,SPAM",
        help="Set the cutoffs by hand, as log-odds: ham below HAM, spam from SPAM, unsure between.",
    ),
    click.option(
        "-c",
        "--config",
        "config_file",
        type=click.Path(dir_okay=False),
        help="YAML file of settings (keys are these option names); options given here win.",
    ),
]


def engine_options(f):
    """--engine, --scheduler and its TLS files: where the messages are tokenized and
    counted."""
    for name, what in (
        ("--tls-key", "the key of --tls-cert, where that file does not hold it"),
        ("--tls-cert", "this client's certificate (PEM), signed by a CA the scheduler trusts"),
        ("--tls-ca-file", "the CA (PEM) that signed the scheduler's certificate"),
    ):
        f = click.option(
            name,
            metavar="FILE",
            type=click.Path(exists=True, dir_okay=False),
            help=f"With --scheduler: {what}. Default: Dask's distributed.comm.tls settings.",
        )(f)
    f = click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="With --engine dask: the address of a running Dask scheduler, tls://HOST:PORT, with --tls-ca-file and --tls-cert; without it a local cluster of --jobs workers is started (in this process for one; else talking TLS on 127.0.0.1 only, with a certificate made for the run). The scheduler is trusted with your account: it can run any code as you. Plain tcp:// is refused. Reaching it may take 20 s at most.",
    )(f)
    return click.option(
        "--engine",
        type=click.Choice(["local", "dask"]),
        default="local",
        show_default=True,
        help="local: worker processes on this machine; dask: the workers of a Dask cluster parse, tokenize and count (train: their counts are added up; predict: they score; evaluate: the folds are fitted here), needing Dask: pip install 'dask[distributed]'. Both give the same model and the same predictions.",
    )(f)


def _engine(
    name: str,
    scheduler: str | None,
    tls_ca_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    jobs: int,
) -> Any:
    """The `engine.Engine` of --engine, --scheduler, its TLS files and --jobs."""
    from ..service.engine import Engine

    return Engine(name, scheduler, tls_ca_file, tls_cert, tls_key, jobs)


@cli.command()
@quiet_option
@click.argument("data", nargs=-1)
@output_model_option()
@files_from_options
@path_options
@train_options
@table_options
@jobs_option
@engine_options
@click.option(
    "--min-docs",
    type=click.IntRange(min=1),
    metavar="K",
    help="Drop for good the terms found in fewer than K messages, as 'nbspam prune "
    "--min-docs K' does after training; with --engine dask while the counts are added up, "
    "so that no process holds the terms dropped. (--min-count only leaves them out of "
    "scoring, their counts kept.)",
)
@click.option(
    "--max-terms",
    type=click.IntRange(min=1),
    metavar="N",
    help="Keep only the N terms found in most messages (ties: in term order), as 'nbspam "
    "prune --max-terms N' does after training; with --engine dask while the counts are "
    "added up. (--max-features only leaves the others out of scoring.)",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also show the settings auto tried and why each was kept or not, the vocabulary, "
    "the cutoffs and the calibration.",
)
def train(
    data: tuple[str, ...],
    output: str,
    verbose: bool,
    min_docs: int | None,
    max_terms: int | None,
    files_from,
    null: bool,
    follow_links: bool,
    literal_paths: bool,
    config_file: str | None,
    jobs: int,
    engine: str,
    scheduler: str | None,
    tls_ca_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    **options: Any,
) -> None:
    """Train a model on labelled messages and write it to a file.

    DATA is a folder with one subfolder per label (messages are found recursively below
    each: files, Maildirs, mboxes), a table (TSV lines "label<TAB>text", CSV with label and
    text columns, JSON Lines with label and text keys), or LABEL=PATH for every message of
    PATH under one label. --files-from reads more DATA, one per line.

    A CSV or JSON Lines table without a text column (or any table with --label-column,
    --column or --bins) is a typed table: each column is modelled by its kind (gaussian,
    categorical, bernoulli, text), detected or given with --column; with --event-model auto
    the continuous columns are modelled as internal cross-validation finds best.

    \b
    Example:
      nbspam train sample_data/train -o spam.nbm
      nbspam train spam=spam.mbox ham=~/Maildir -o spam.nbm --event-model bernoulli
      nbspam train sms.tsv -o sms.nbm -c configs/bernoulli.yaml
      nbspam train corpus/ -o spam.nbm --engine dask --min-docs 2 --max-terms 1000000
    """
    from .. import api

    _one_malloc_arena()
    listed = list(_listed(files_from, null))
    specs = [*data, *listed]
    check_outputs(
        [("-o", output, "the model")],
        [*_data_inputs(specs), *_setting_inputs(config_file, options)],
    )
    if not specs:
        raise click.UsageError("give DATA to train on, or --files-from")
    _check_output(output)
    report = Reporter("read")
    given = [(spec, literal_paths) for spec in data] + [(spec, True) for spec in listed]
    report.total = _input_bytes(given, labelled=True)
    reading = api.Reading(
        report.problems,
        report.progress,
        follow_links,
        literal_paths,
        listed=listed,
        watch=report.watch,
    )
    engine = _engine(engine, scheduler, tls_ca_file, tls_cert, tls_key, jobs)
    model = api.train(
        list(data),
        config=config_file,
        reading=reading,
        engine=engine,
        min_docs=min_docs,
        max_terms=max_terms,
        **_table(options),
    ).model
    from ..store.kinds import save  # not before training: it starts its workers first

    save(model, output)
    status = report.finish()
    from .render import train_summary_of

    for line in train_summary_of(model, output, os.path.getsize(output), verbose=verbose):
        say(line)
    sys.exit(status)


def _input_bytes(
    paths: Iterable[tuple[str, bool]], *, labelled: bool = False
) -> Callable[[], int | None]:
    """The total of the progress bar, as a function (`progress.Total`) that lists the
    bytes to read in each (PATH, whether it is read literally) when the total is first
    shown (`extent.input_bytes`; None where not known): never with -q, nor in a job off a
    terminal that ends before its first progress line."""
    paths = list(paths)

    def total() -> int | None:
        from ..mail.extent import input_bytes

        found = 0
        for path, literal in paths:
            size = input_bytes([path], labelled=labelled, literal=literal)
            if size is None:
                return None
            found += size
        return found

    return total


def _check_output(path: str) -> None:
    """Refuse a model file that could not be written, before the work that makes it: a
    device, FIFO or folder at the path (or behind its links), a link of another user there
    or a name another user made first in a folder anyone may write
    (`safefiles.check_model_path`), or a folder not writable."""
    from ..store.container import target
    from ..store.safefiles import check_model_path

    check_model_path(path)
    check_writable(str(target(path)), "-o")


def check_writable(path: str, option: str) -> None:
    """Refuse an output file that could not be written: its folder is missing or not
    writable, or it is a folder or not writable itself."""
    folder = os.path.dirname(path) or "."
    if os.path.isdir(path):
        raise NbspamError(f"{option} {path}: is a folder, give a file name")
    if not os.path.isdir(folder):
        raise NbspamError(f"{option} {path}: no such folder {folder}")
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        raise NbspamError(f"{option} {path}: permission denied")


def check_output_file(path: str, option: str, what: str) -> None:
    """Refuse an output that is not a model (`container.write_output`: a scores file, a
    plot, a dump) before the work that makes it: a symbolic link, FIFO, device or folder at
    the path (a neighbour's trap: it is never written through), or a folder not writable."""
    from ..store.safefiles import check_output_path

    check_output_path(path, what)
    check_writable(path, option)


def check_outputs(outputs, inputs) -> None:
    """`safefiles.check_outputs`: no output may be an input, before any work starts."""
    from ..store.safefiles import check_outputs as check

    check(outputs, inputs)


def _data_inputs(specs: Iterable[str]) -> list[tuple[str, str]]:
    """(path, what) of each DATA spec: a LABEL=PATH spec names PATH (as `read_labelled`
    reads it)."""
    from ..mail.messages import label_spec

    out = []
    for spec in specs:
        labelled = label_spec(spec)
        if labelled is not None:
            spec = labelled[1]
        out.append((spec, f"the input {spec}"))
    return out


def _inputs(paths: Iterable[str]) -> list[tuple[str, str]]:
    """(path, what) of each PATH a command reads."""
    return [(path, f"the input {path}") for path in paths]


def _setting_inputs(config_file: str | None, options: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, what) of the files of settings a training command reads."""
    words = options.get("stop_words")
    files = [("the --config file", config_file)]
    if words not in (None, "english", "none"):
        files.append(("the --stop-words file", words))
    return [(path, what) for what, path in files if path]


def _paths(
    paths: tuple[str, ...], files_from, null: bool, literal: bool = False
) -> Iterator[tuple[str, bool]]:
    """(path, whether it is read literally) of the PATH arguments (as ``literal`` says), then
    of the paths of --files-from (always literally: file names, as for tar -T and xargs -0);
    none at all means stdin."""
    if not paths and files_from is None:
        yield "-", True
    for path in paths:
        yield path, literal
    for path in _listed(files_from, null):
        yield path, True


def _listed(files_from, null: bool) -> Iterator[str]:
    """The paths in a --files-from file: one per line, or NUL-separated with -0. Each is a
    file name (``-`` is stdin), never a glob or a URL."""
    if files_from is None:
        return
    for raw in files_from.read().split(b"\0" if null else b"\n"):
        raw = raw if null else raw.rstrip(b"\r")
        if raw:
            yield os.fsdecode(raw)


@cli.command()
@quiet_option
@model_option
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@files_from_options
@path_options
@MESSAGE_FORMATS
@jobs_option
@engine_options
@user_options
def predict(
    model_path: str,
    user: str | None,
    user_models: str | None,
    paths: tuple[str, ...],
    files_from,
    null: bool,
    follow_links: bool,
    literal_paths: bool,
    fmt: str,
    jobs: int,
    engine: str,
    scheduler: str | None,
    tls_ca_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
) -> None:
    """Classify messages: a label and posterior probabilities for each.

    A PATH is a message file, an mbox, a Maildir, a folder (every file below it), a table,
    or '-' for one message on stdin (the default when no PATH is given). For two-class
    models the log-odds log P(positive|x) - log P(negative|x) is printed too: it never
    saturates, so rank by it rather than by probability. They also get a verdict by the
    model's cutoffs (ham, unsure or spam) and a calibrated probability of spam. Messages
    of less than 1 MB in all are scored in one process whatever --jobs: starting workers
    would cost more than they save.

    \b
    Example:
      nbspam predict -m spam.nbm sample_data/new
      nbspam predict -m spam.nbm < message.eml
      find ~/Maildir/new -type f | nbspam predict -m spam.nbm --files-from - -f jsonl
    """
    from ..service.predicting import predict as predict_inputs
    from . import render
    from .prediction_lines import prediction_blocks

    layer = _layer(user, user_models)
    if not paths and files_from is None and not quiet():
        from .stdin import hint_on_terminal

        hint_on_terminal()
    if files_from is None and paths in ((), ("-",)) and layer is None:
        # one message on stdin (a mail filter's case): score it without numpy or scipy
        from .stdin import predict_stdin

        if predict_stdin(model_path, fmt):
            return
    report = Reporter("scored")
    inputs = list(_paths(paths, files_from, null, literal_paths))
    report.total = _input_bytes(inputs)
    done = predict_inputs(
        model_path,
        inputs,
        report.problems,
        engine=_engine(engine, scheduler, tls_ca_file, tls_cert, tls_key, jobs),
        layer=layer,
        follow_links=follow_links,
        watch=report.watch,
    )
    if done.noun != "messages":  # rows of tables: their bytes were told as they were read
        report.noun, report.total = done.noun, None
    emit_lines(prediction_blocks(done.results, done.labels, fmt), report.progress)
    note = render.unseen_note(done.unseen)
    if note:
        say(f"note: {note}")
    sys.exit(report.finish())


@cli.command()
@quiet_option
@model_option
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option(
    "-n",
    "--top",
    type=click.IntRange(min=1),
    help="How many words to show: per class for the model [default: 20], per message [default: all].",
)
@click.option(
    "--against",
    metavar="LABEL",
    help="More than two classes: compare with this class (default: the runner-up).",
)
@files_from_options
@path_options
@MESSAGE_FORMATS
def explain(
    model_path: str,
    paths: tuple[str, ...],
    top: int | None,
    against: str | None,
    files_from,
    null: bool,
    follow_links: bool,
    literal_paths: bool,
    fmt: str,
) -> None:
    """Show the words that decide: globally, or for each given message.

    Without PATH: for each class, the words with the largest log-odds weight toward it,
    with their counts per class. With PATH (a message file, folder, mbox or '-' for
    stdin): each word's contribution to the message's log-odds, largest first, and the
    bias; the contributions plus the bias equal the log-odds that 'predict' prints.

    \b
    Example:
      nbspam explain -m spam.nbm --top 15
      nbspam explain -m spam.nbm sample_data/new/001.eml
      nbspam explain -m spam.nbm -f jsonl - < message.eml
    """
    from ..service.predicting import explain as explain_inputs
    from . import render

    given = bool(paths) or files_from is not None
    report = Reporter("explained")
    model, explained = explain_inputs(
        model_path,
        list(_paths(paths, files_from, null, literal_paths)) if given else None,
        report.problems,
        top=top,
        against=against,
        follow_links=follow_links,
    )
    if not given:
        for line in render.model_explanation(model, explained, fmt, top):
            emit(line)
        return
    for line in render.input_explanations(explained, fmt, top):
        emit(line)
    sys.exit(report.finish())


@cli.command()
@quiet_option
@click.argument("data", nargs=-1, required=True)
@click.option(
    "--folds",
    "cv_folds",
    type=click.IntRange(min=2),
    default=5,
    show_default=True,
    help="Stratified cross-validation with this many folds.",
)
@click.option(
    "--seed", type=int, default=42, show_default=True, help="Seed of the fold assignment."
)
@click.option(
    "--test",
    "test_data",
    multiple=True,
    metavar="DATA",
    help="Instead: train on DATA and score this labelled test set (repeatable).",
)
@click.option(
    "--chronological",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    metavar="FRACTION",
    help="Instead: train on the oldest messages (by Date header, else input order) and score the newest FRACTION.",
)
@format_option(
    ["text", "json", "markdown"],
    "Report format: text for people, json (or jsonl, the same) for programs, markdown for "
    "documents.",
    aliases={"jsonl": "json"},
)
@click.option(
    "--scores",
    "scores_file",
    type=click.Path(dir_okay=False),
    help="Also write each message's out-of-sample scores as JSON Lines to this file (replaced atomically, never through a symbolic link).",
)
@click.option(
    "--plot",
    type=click.Path(dir_okay=False),
    help="Draw the ROC curve and the score histograms to this .png or .svg file (needs matplotlib; replaced atomically, never through a symbolic link).",
)
@click.option(
    "--online",
    is_flag=True,
    help="Instead: the TREC spam track's online protocol: score each message in order, then learn it.",
)
@click.option(
    "--order",
    type=click.Choice(["date", "input", "shuffle"]),
    default="date",
    show_default=True,
    help="--online: messages by Date header (undated ones keep their place), as given, or shuffled with --seed.",
)
@click.option(
    "--learn",
    "learn_policy",
    type=click.Choice(["all", "errors", "unsure", "autolearn", "errors+autolearn"]),
    default="all",
    show_default=True,
    help="--online: learn every message, the errors, the errors and unsure ones (true labels), only confident ones with the label given (autolearn), or errors and confident ones.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=1),
    metavar="N",
    help="--online: train on the first N messages first (they fix the event model and the cutoffs).  [default: 10%, at most 1,000]",
)
@autolearn_options("--learn autolearn")
@path_options
@train_options
@table_options
@jobs_option
@engine_options
def evaluate(
    data,
    cv_folds,
    seed,
    test_data,
    chronological,
    fmt,
    scores_file,
    plot,
    online,
    order,
    learn_policy,
    warmup,
    autolearn_spam,
    autolearn_ham,
    follow_links,
    literal_paths,
    config_file,
    jobs,
    engine,
    scheduler,
    tls_ca_file,
    tls_cert,
    tls_key,
    **options,
):
    """Measure how well the settings of 'train' classify labelled messages.

    Trains and scores with exactly the options 'train' takes: stratified k-fold
    cross-validation (default), a separate test set (--test), or a chronological split.
    Reports precision, recall and F1 per class, accuracy, Matthews correlation, ROC AUC and
    (1-ROCA)% (TREC spam track) on the continuous log-odds, spam recall at 0.1% and 1%
    false positives, the confusion matrix, and for two-class models the outcome at each
    fold's own cutoffs (chosen as 'train' chooses them) and the calibration of the
    probabilities (reliability table, Brier score, log loss).

    \b
    Example:
      nbspam evaluate sample_data/train --folds 4
      nbspam evaluate ../corpus --folds 5 -f markdown --plot roc.svg
      nbspam evaluate train/ --test test/ -f json
      nbspam evaluate ../mail --online --learn errors --plot curve.svg
    """
    from .. import api
    from .render import render_report

    check_outputs(
        [("--scores", scores_file, "the --scores file"), ("--plot", plot, "the --plot file")],
        [*_data_inputs([*data, *test_data]), *_setting_inputs(config_file, options)],
    )
    if online and (test_data or chronological):
        raise click.UsageError(
            "--online is a protocol of its own: not with --test or --chronological"
        )
    # what would fail after the cross-validation fails before it
    if scores_file:
        check_output_file(scores_file, "--scores", "scores file")
    if plot:
        check_output_file(plot, "--plot", "plot")
        from ..evaluation.plot import check_plot

        check_plot(plot)
    talk = Reporter("read")
    if not test_data:  # one stream read: its bytes are the bar's total
        talk.total = _input_bytes([(spec, literal_paths) for spec in data], labelled=True)
    evaluated = api.evaluate(
        list(data),
        folds=cv_folds,
        seed=seed,
        test=list(test_data) or None,
        chronological=chronological,
        online=online,
        order=order,
        learn=learn_policy,
        warmup=warmup,
        autolearn_spam=autolearn_spam,
        autolearn_ham=autolearn_ham,
        scores=scores_file,
        plot=plot,
        config=config_file,
        reading=api.Reading(
            talk.problems, talk.progress, follow_links, literal_paths, watch=talk.watch
        ),
        engine=_engine(engine, scheduler, tls_ca_file, tls_cert, tls_key, jobs),
        **_table(options),
    )
    status = talk.finish()
    for line in render_report(evaluated, fmt):
        emit(line)
    if plot:
        say(f"wrote {plot}")
    sys.exit(status)


class FilterCommand(click.Command):
    """`filter` parses as any command, but with --exit-status a usage error exits 3 (an
    error), never 2, which would read as 'unsure'; and a message on stdin still passes
    through unchanged."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        given = list(args)
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as error:
            if "--exit-status" in given:
                from ..service.filtering import FILTER_EXIT

                error.exit_code = FILTER_EXIT["error"]
            if not sys.stdin.isatty():  # a delivery: the message must come out all the same
                sys.stdout.buffer.write(sys.stdin.buffer.read())
                sys.stdout.buffer.flush()
            raise


def _move_option(verdict: str, what: str):
    """The option --move-VERDICT: where `filter` moves messages of one verdict."""
    return click.option(
        f"--move-{verdict}",
        metavar="DIR",
        type=click.Path(file_okay=False),
        help=f"Folders: move {what} to DIR, a Maildir (created if missing) or an existing plain folder.",
    )


@cli.command("filter", cls=FilterCommand)
@quiet_option
@model_option
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option(
    "--exit-status",
    is_flag=True,
    help="One message: exit 0 for spam, 1 ham, 2 unsure, 3 error (bogofilter's convention).",
)
@_move_option("spam", "messages of the spam verdict (the positive label)")
@_move_option("unsure", "messages of the unsure verdict")
@_move_option("ham", "messages of the ham verdict (the negative label)")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Folders: report what would be moved; move nothing, write no state.",
)
@click.option(
    "--report",
    "report_path",
    metavar="FILE|-",
    help="Folders: append a JSON line for each new message to FILE ('-' for stdout), never written through a symbolic link.",
)
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False),
    help="Folders: the record of messages filtered before, never written through a symbolic link, made with the model's mode and group. [default: MODEL.state]",
)
@click.option(
    "--autolearn",
    is_flag=True,
    help="Learn the messages scored with very high confidence, under their verdict (into MODEL).",
)
@click.option(
    "--header-style",
    type=click.Choice(["nbspam", "spamassassin", "bogofilter"]),
    help="One message: the verdict headers to add, so that existing rules work: nbspam "
    "(X-Nbspam-Status), spamassassin (X-Spam-Flag: YES, X-Spam-Status: Yes, score=...) or "
    "bogofilter (X-Bogosity: Spam, ...); X-Nbspam-Status is always added too. "
    "[default: header-style of the -c file, else nbspam]",
)
@click.option(
    "-c",
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="YAML file of settings, as train's: filter takes header-style from it (the "
    "training settings it holds are train's); --header-style wins.",
)
@autolearn_options("--autolearn")
@jobs_option
@user_options
def filter_mail(
    model_path: str,
    user: str | None,
    user_models: str | None,
    paths: tuple[str, ...],
    exit_status: bool,
    header_style: str | None,
    config_file: str | None,
    move_spam: str | None,
    move_unsure: str | None,
    move_ham: str | None,
    dry_run: bool,
    report_path: str | None,
    state_path: str | None,
    autolearn: bool,
    autolearn_spam: float,
    autolearn_ham: float,
    jobs: int,
) -> None:
    """Classify mail unattended: one message on stdin, or Maildirs and folders.

    Without PATH, one message is read from stdin and written to stdout unchanged but for
    one added header, "X-Nbspam-Status: spam; log_odds=+12.345; calibrated=0.9731;
    version=...", for procmail, maildrop or Sieve to act on. If anything fails the message
    still comes out unchanged, with one line "Error: ..." on stderr.

    With PATHs (Maildirs, or folders of message files), each message not filtered before
    is scored and, with --move-spam, --move-unsure or --move-ham, moved (from new/ to
    DEST/new/, from cur/ to DEST/cur/, flags kept; never overwriting). The digest of every
    message handled goes to the state file, so the next run (from cron, say) handles only
    new mail and a message moved back by hand stays where it is. A move is a rename on one
    file system, and a copy flushed to disk before the unlink across two: no message is
    lost, even if the run is killed.

    With --autolearn the messages whose calibrated probability of spam is at least
    --autolearn-spam (learned as spam) or at most --autolearn-ham (as ham) are learned
    into MODEL after they are scored, as 'learn' would, unless MODEL learned them before.
    Mistakes learned this way are not corrected: see docs/learning.md for what it does to
    accuracy.

    \b
    Example:
      nbspam filter -m spam.nbm < message.eml > filtered.eml
      nbspam filter -m spam.nbm --exit-status < message.eml > /dev/null; echo $?
      nbspam filter -m spam.nbm ~/Maildir --move-spam ~/Maildir/.Junk --dry-run --report -
    """
    batch_only = [
        name
        for name, given in (
            ("--move-spam", move_spam),
            ("--move-unsure", move_unsure),
            ("--move-ham", move_ham),
            ("--dry-run", dry_run),
            ("--report", report_path),
            ("--state", state_path),
        )
        if given
    ]
    from ..service.filtering import Autolearn

    learner = Autolearn(autolearn_spam, autolearn_ham) if autolearn else None
    layer = _layer(user, user_models)
    if not paths:
        misuse = f"{', '.join(batch_only)}: for folders only, give PATHs" if batch_only else None
        from ..service.filtering import filter_stdin

        sys.exit(
            filter_stdin(
                model_path,
                exit_status=exit_status,
                misuse=misuse,
                autolearn=learner,
                layer=layer,
                style=header_style,
                config=config_file,
            )
        )
    if exit_status:
        raise click.UsageError("--exit-status is for one message on stdin (no PATH)")
    if layer is not None:
        raise click.UsageError("--user is for one message on stdin (no PATH)")
    from ..service.filtering import filter_paths, report_writer
    from ..service.mailstore import default_state_path

    state_path = state_path or default_state_path(model_path)
    check_outputs(
        [
            ("-m", model_path, "the model"),
            ("--state", None if dry_run else state_path, "the --state file"),
            ("--report", report_path, "the --report file"),
        ],
        _inputs(paths),
    )
    report = Reporter("filtered")
    moves = {"spam": move_spam, "unsure": move_unsure, "ham": move_ham}
    with report_writer(report_path, stdout=emit) as write:
        lines = filter_paths(
            model_path,
            paths,
            moves,
            state_path=state_path,
            dry_run=dry_run,
            problems=report.problems,
            report=write,
            progress=report.progress,
            jobs=jobs,
            autolearn=learner,
        )
    status = report.finish()
    for line in lines:
        say(line)
    sys.exit(status)


@cli.command()
@quiet_option
@model_option
@click.option(
    "-l",
    "--label",
    help="The label the messages are learned as (required for a model of messages; a table "
    "model learns each row under its label column unless --label is given).",
)
@click.option(
    "--new-label",
    is_flag=True,
    help="Allow a label the model does not have yet (it gains a class).",
)
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@files_from_options
@path_options
@user_options
def learn(
    model_path: str,
    label: str | None,
    new_label: bool,
    user: str | None,
    user_models: str | None,
    paths: tuple[str, ...],
    files_from,
    null: bool,
    follow_links: bool,
    literal_paths: bool,
) -> None:
    """Add messages to a model under a label, in place (to correct a mistake, say).

    A message the model already learned under this label is left alone; one learned under
    another label has its counts moved. The result equals training on all the messages at
    once. The change is appended to the model's journal (MODEL.journal), in time that
    does not grow with the model, and on disk before learn ends; every reader applies it,
    and a journal past 1 MiB is folded into the model ('nbspam compact'). Concurrent updates
    of one model wait for each other. With --user, the change goes to that user's layer
    only. PATHs are read as by 'predict' ('-' or none: one message on stdin).

    \b
    Example:
      nbspam learn -m spam.nbm --label spam missed-spam.eml
      nbspam learn -m spam.nbm --label ham ~/Maildir/.Ham/cur
    """
    from ..service.learning import learn as learn_inputs

    listed = list(_paths(paths, files_from, null, literal_paths))
    given = [path for path, _ in listed] if paths or files_from is not None else []
    layer = _layer(user, user_models)
    check_outputs(
        [("-m", model_path, "the model"), ("--user", layer, "the user's layer")], _inputs(given)
    )
    report = Reporter("learned")
    report.total = _input_bytes(listed)
    line = learn_inputs(
        model_path,
        listed,
        label,
        report.problems,
        given=bool(given),
        layer=layer,
        new_label=new_label,
        follow_links=follow_links,
        watch=report.watch,
    )
    status = report.finish()
    say(line)
    sys.exit(status)


@cli.command()
@quiet_option
@model_option
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@files_from_options
@path_options
@user_options
def forget(
    model_path: str,
    user: str | None,
    user_models: str | None,
    paths: tuple[str, ...],
    files_from,
    null: bool,
    follow_links: bool,
    literal_paths: bool,
) -> None:
    """Remove learned messages from a model, in place.

    The result equals training without them. A message the model never learned is
    reported and skipped (exit status 3). If 'nbspam prune' expired digests of the model,
    a message it does not remember may have been learned: it is refused (one line, exit
    status 1) and nothing is forgotten. Written through the journal, as 'learn' is; with
    --user, into that user's layer only.

    \b
    Example:
      nbspam forget -m spam.nbm wrongly-learned.eml
    """
    from ..service.learning import forget as forget_inputs

    listed = list(_paths(paths, files_from, null, literal_paths))
    given = [path for path, _ in listed] if paths or files_from is not None else []
    layer = _layer(user, user_models)
    check_outputs(
        [("-m", model_path, "the model"), ("--user", layer, "the user's layer")], _inputs(given)
    )
    report = Reporter("forgot")
    report.total = _input_bytes(listed)
    line = forget_inputs(
        model_path,
        listed,
        report.problems,
        given=bool(given),
        layer=layer,
        follow_links=follow_links,
        watch=report.watch,
    )
    status = report.finish()
    say(line)
    sys.exit(status)


@cli.command()
@quiet_option
@model_option
def compact(model_path: str) -> None:
    """Fold the model's journal (MODEL.journal) into the model file.

    'learn', 'forget' and 'sync' append to the journal instead of rewriting the model, and
    fold it themselves once it passes 1 MiB. Folding rewrites the model atomically with the
    journal's changes, then removes the journal; the model's counts are the same before and
    after. Until then, scoring one message reads the whole model instead of its scoring
    table, so compact after a batch of corrections keeps filtering quick.

    \b
    Example:
      nbspam compact -m spam.nbm
    """
    from ..service.journalled import compact as compact_model

    folded = compact_model(model_path)
    say(f"folded {folded:,} journal record(s) into {model_path}")


def _date(value: str | None) -> int | None:
    """--expire-before DATE (YYYY-MM-DD, UTC midnight) as seconds since 1970."""
    if value is None:
        return None
    import calendar

    try:
        day = time.strptime(value, "%Y-%m-%d")
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a date YYYY-MM-DD") from None
    return calendar.timegm(day)


@cli.command()
@quiet_option
@model_option
@click.option(
    "-o",
    "--output",
    type=click.Path(),
    help="Write the pruned model here (replaced atomically) instead of in place.",
)
@click.option(
    "--min-count",
    "--min-docs",
    "min_docs",
    type=click.IntRange(min=1),
    metavar="K",
    help="Drop for good the terms found in fewer than K messages, as train --min-docs does "
    "(train's --min-count only leaves them out of scoring; here it is another name).",
)
@click.option(
    "--max-features",
    "--max-terms",
    "max_terms",
    type=click.IntRange(min=1),
    metavar="N",
    help="Keep only the N terms found in most messages (ties: in term order), as train "
    "--max-terms does (train's --max-features only leaves the others out of scoring; here "
    "it is another name).",
)
@click.option(
    "--expire-before",
    metavar="DATE",
    help="Expire the digests of messages learned before DATE (YYYY-MM-DD, UTC); digests of unknown learn time (models written before learn times were recorded) are kept.",
)
@click.option(
    "--keep-digests",
    type=click.IntRange(min=0),
    metavar="N",
    help="Keep the digests of only the N messages learned last (unknown learn times count as oldest).",
)
def prune(
    model_path: str,
    output: str | None,
    min_docs: int | None,
    max_terms: int | None,
    expire_before: str | None,
    keep_digests: int | None,
) -> None:
    """Make a model smaller: drop rare terms, expire the digests of old messages.

    Scoring uses the terms left; the class counts stay exact. What stops being exact: a
    dropped term's counts are gone, so learning its word again counts it from zero, and
    forgetting a message subtracts only the terms still in the model (never below zero). A
    message whose digest expired cannot be forgotten (forget refuses it, saying why) and
    learning it again counts it twice. 'nbspam info' shows how many terms were dropped
    and digests expired, and when. Without -o the model is pruned in place.

    \b
    Example:
      nbspam prune -m spam.nbm --min-docs 2 --max-terms 200000
      nbspam prune -m spam.nbm --expire-before 2024-01-01 --keep-digests 100000
    """
    from ..service.update import prune as prune_model
    from ..service.update import update_model_file
    from ..store.modelfile import load_model, write_model

    if (min_docs, max_terms, expire_before, keep_digests) == (None, None, None, None):
        raise click.UsageError(
            "give what to prune: --min-count, --max-features, --expire-before or --keep-digests"
        )
    before = _date(expire_before)

    def change(model):
        return prune_model(
            model,
            min_docs=min_docs,
            max_terms=max_terms,
            expire_before=before,
            keep_digests=keep_digests,
        )

    report = Reporter("pruned")  # shows the steps of update_model_file
    if output is None:
        _, done = update_model_file(model_path, change)
    else:
        _check_output(output)
        check_outputs(
            [("-o", output, "the pruned model")], [(model_path, "the model being pruned")]
        )
        pruned, done = change(load_model(model_path))
        write_model(pruned, output)
    report.finish()
    say(
        f"pruned {output or model_path}: kept {done.terms_kept:,} terms "
        f"({done.terms_dropped:,} dropped), {done.digests_kept:,} digests "
        f"({done.digests_expired:,} expired)",
    )


@cli.command()
@quiet_option
@model_option
@click.argument("folders", nargs=-1, required=True, metavar="LABEL=FOLDER...")
@click.option(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False),
    help="Where sync keeps what it has learned, never written through a symbolic link, made with the model's mode and group. [default: MODEL.sync]",
)
@follow_links_option
def sync(
    model_path: str, folders: tuple[str, ...], state_path: str | None, follow_links: bool
) -> None:
    """Learn what was done with the mail in FOLDERS: each message as its folder's label.

    Each folder is given with a label of the model, LABEL=FOLDER (a Maildir, or a folder of
    message files). A message new in a spam folder is learned as spam; one moved from the
    Junk folder to the inbox is relabelled, its counts moved, so the model equals training
    on the messages under the labels their folders give them now. Messages deleted from
    every folder stay learned (use forget). A file inside two of the folders (spam=mail/Junk
    ham=mail) belongs to the more specific one; copies of a message in folders of two labels
    are left as the model had them, and reported. Run it from cron: a state file
    (MODEL.sync) remembers what was learned, so a run opens only the messages new to a
    folder, and a run killed at any point loses and double-counts nothing. It holds the
    model's lock, and counts messages as it reads them: memory does not grow with the
    folders.

    The state is checked against the model at every run: messages the model no longer
    holds as sync learned them (after train -o, restore, learn or forget) are read and
    learned again, with one note; digests prune expired are not learned twice.

    \b
    Example: (Maildir++, Junk a subfolder of the inbox)
      nbspam sync -m spam.nbm spam=~/Maildir/.Junk ham=~/Maildir ham=~/Maildir/.Archive
    """
    from ..service.sync import default_state_path
    from ..service.sync import sync as sync_folders

    state_path = state_path or default_state_path(model_path)
    check_outputs(
        [("-m", model_path, "the model"), ("--state", state_path, "the --state file")],
        _data_inputs(folders),
    )
    report = Reporter("synced")
    done = sync_folders(model_path, folders, state_path, report.problems, follow_links=follow_links)
    status = report.finish()
    learned = (
        ", ".join(f"{n:,} as {label}" for label, n in done.learned.items() if n) or "nothing new"
    )
    say(
        f"synced {done.found:,} message(s), opened {done.opened:,}: learned {learned}, "
        f"{done.relabelled:,} moved from another label, {done.unchanged:,} already known"
        + (f"; {done.gone:,} no longer in the folders (still learned)" if done.gone else ""),
    )
    sys.exit(status)


@cli.command()
@quiet_option
@click.argument("models", nargs=-1, required=True, type=click.Path())
@output_model_option("the merged model", default=False)
def merge(models: tuple[str, ...], output: str) -> None:
    """Merge models trained with the same settings on disjoint sets of messages.

    The counts add up to those of the model trained on all their messages at once. Parts
    trained with --event-model auto (the default) may have chosen different event models
    and settings: the merged model takes those of the part that learned most messages, and
    its cutoffs and calibration (fitted on that part alone; train on all the messages to
    fit them on everything). Models with other settings, or that learned a message in
    common, are refused.

    \b
    Example:
      nbspam train part1/ -o a.nbm && nbspam train part2/ -o b.nbm
      nbspam merge a.nbm b.nbm -o all.nbm
    """
    from ..service.learning import merge as merge_models

    if len(models) < 2:
        raise click.UsageError("merge needs two or more models")
    check_outputs([("-o", output, "the merged model")], [(m, f"the model {m}") for m in models])
    _check_output(output)
    for line in merge_models(models, output):
        say(line)


@cli.command()
@quiet_option
@model_option
@click.option(
    "-o",
    "--output",
    type=click.Path(),
    help="Write the dump to this file (replaced atomically, never through a symbolic link) instead of stdout.",
)
def dump(model_path: str, output: str | None) -> None:
    """Write a model as text: settings, classes, one line per term, messages learned.

    For backups, for moving a model to another version of nbspam, and for reading it with
    shell tools. The dump holds all the model file holds but its scoring table, which is
    derived from the counts: 'nbspam restore' makes the same file of it, byte for byte.

    \b
    Format: UTF-8 text, fields separated by tabs, every line ending in a line feed:
      # nbspam dump 1
      tokenizer|train|cutoffs|calibration|info  JSON  settings, history
      class  LABEL  MESSAGES                    one line per class
      terms  term  occurrences_LABEL...  documents_LABEL...
      TERM  OCCURRENCES...  DOCUMENTS...        one line per term
      digests  digest  label  learned
      DIGEST  LABEL  LEARNED                    one line per message learned
      end

    A term's line gives its occurrences in each class, then how many messages of each
    class hold it; terms are in code-point order. LEARNED is when the message was learned,
    in seconds since 1970 (-1: unknown). In terms and labels, backslash, tab,
    line feed and carriage return are written as \\\\, \\t, \\n, \\r, other control
    characters as \\uXXXX.

    A table model's dump is the line '# nbspam table dump 1', its model file's JSON header
    (indented), and the line 'end'.

    \b
    Example:
      nbspam dump -m spam.nbm -o spam.dump
      nbspam dump -m spam.nbm | awk -F'\\t' 'NF == 5' | sort -t$'\\t' -k3,3nr | head
    """
    from ..store.kinds import dump as dump_chunks
    from ..store.kinds import load

    if output is not None:
        check_output_file(output, "-o", "dump")
        check_outputs([("-o", output, "the dump")], [(model_path, "the model being dumped")])
    model = load(model_path)
    if output is None:
        out = sys.stdout.buffer
        try:
            for chunk in dump_chunks(model):
                out.write(chunk)
            out.flush()
        except OSError as error:
            if error.errno == errno.EPIPE:
                raise
            raise NbspamError(output_error(error, stdout=True)) from None
        return
    from ..store.container import write_output

    write_output(output, dump_chunks(model), what="dump")
    say(f"dumped {model_path} to {output}")


@cli.command()
@quiet_option
@click.argument("source", default="-", metavar="[DUMP|-]")
@output_model_option(default=False)
def restore(source: str, output: str) -> None:
    """Make a model file of a dump written by 'nbspam dump' (of either kind of model).

    Reads DUMP ('-' or none: stdin) and writes the model to -o MODEL, replaced atomically
    under its lock. Written by the same version of nbspam, it is the file that was dumped,
    byte for byte. The dump is checked as strictly as a model file: one that is cut short,
    malformed or out of range is refused in one line "Error: line N: ..." with exit
    status 1, and nothing is written.

    \b
    Example:
      nbspam restore spam.dump -o spam.nbm
      nbspam dump -m old.nbm | nbspam restore -o new.nbm
    """
    from ..errors import InputError, os_reason
    from ..store.kinds import restore as restore_model
    from ..store.kinds import save
    from .render import restored_line

    _check_output(output)
    if source == "-":
        model = restore_model(sys.stdin.buffer)
    else:
        check_outputs([("-o", output, "the model")], [(source, "the dump being read")])
        try:
            stream = open(source, "rb")
        except OSError as error:
            raise InputError(f"cannot read {source}: {os_reason(error)}") from None
        with stream:
            model = restore_model(stream)
    save(model, output)
    say(restored_line(output, model))


@cli.command()
@model_option
@format_option(
    ["text", "json"],
    "Output format: text for people, json (or jsonl, the same) for programs.",
    aliases={"jsonl": "json"},
)
def info(model_path: str, fmt: str) -> None:
    """Show what is in a model: labels, counts, vocabulary, settings, history.

    \b
    Example:
      nbspam info -m spam.nbm
      nbspam info -m spam.nbm -f json | jq .settings.train.alpha
    """
    from ..store.kinds import describe
    from .render import info as model_info

    model, facts = describe(model_path)
    for line in model_info(model_path, model, facts, fmt):
        emit(line)


@cli.command()
@model_option
@click.option(
    "--listen",
    "listen",
    multiple=True,
    metavar="PROTOCOL:unix:PATH|PROTOCOL:inet:HOST:PORT",
    help="Where to listen and which protocol (spamd or milter); repeat for several "
    "[default: spamd:unix:/run/nbspam/spamd.sock]. Sockets passed by systemd (LISTEN_FDS) "
    "replace these.",
)
@click.option(
    "--user-models",
    metavar="TEMPLATE",
    envvar="NBSPAM_USER_MODELS",
    help="Where users' layers are, as for learn and predict --user: a path whose file name "
    "holds %u (e.g. /var/lib/nbspam/users/%u.nbj; or $NBSPAM_USER_MODELS). The user is "
    "spamc's -u or the milter recipient's local part (in lower case, without the extension "
    "of --recipient-delimiter); a user scores with the model plus "
    "the user's layer, and TELL learns into it. Its folder must belong to root or to you, "
    "with the sticky bit where a group or others may write it (install -d -m 1777).",
)
@click.option(
    "--socket-mode",
    default="660",
    show_default=True,
    metavar="OCTAL",
    help="Permissions of the Unix sockets the server makes.",
)
@click.option("--socket-group", metavar="GROUP", help="Group of the Unix sockets (e.g. postfix).")
@click.option(
    "--allow",
    multiple=True,
    metavar="ADDRESS[/BITS]",
    help="Client addresses a TCP listener accepts; repeat for several "
    "[default: 127.0.0.1 and ::1].",
)
@click.option(
    "--max-size",
    type=click.IntRange(min=1),
    default=10 << 20,
    show_default=True,
    metavar="BYTES",
    help="Largest message: spamd refuses a larger one (EX_TOOBIG, spamc passes it on "
    "unscored); milter scores its first BYTES.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Connections served at once; more are closed at once.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Time for a whole spamd request (or one milter packet) to arrive; a slower client "
    "is cut off. Also how long SIGTERM waits for messages under way.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0.1),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Time a milter connection may wait between packets.",
)
@click.option(
    "--allow-tell",
    is_flag=True,
    help="Take TELL requests (spamc -L spam|ham|forget): learn and forget through the "
    "model's journal (or the user's layer), answered once it is on disk.",
)
@click.option(
    "--milter-action",
    "milter_actions",
    multiple=True,
    metavar="VERDICT=ACTION",
    help="What milter does with a verdict (spam, unsure, ham) beside the header: reject "
    "(550 5.7.1) or quarantine (Postfix's hold queue); repeat for several [default: header].",
)
@click.option(
    "--recipient-delimiter",
    default="",
    metavar="CHARS",
    help="What starts an address extension, as Postfix's recipient_delimiter (e.g. +): "
    "milter picks alice's layer for alice+lists@. Milter folds local parts to lower case "
    "either way. [default: none]",
)
@click.option("--syslog", is_flag=True, help="Log to syslog (facility mail) instead of stderr.")
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="Check the configuration and the model, print it and exit (0 if it can serve).",
)
def serve(
    model_path: str,
    listen: tuple[str, ...],
    user_models: str | None,
    socket_mode: str,
    socket_group: str | None,
    allow: tuple[str, ...],
    max_size: int,
    max_connections: int,
    timeout: float,
    idle_timeout: float,
    allow_tell: bool,
    milter_actions: tuple[str, ...],
    recipient_delimiter: str,
    syslog: bool,
    check_only: bool,
) -> None:
    """Score mail as a resident server: spamd (spamc, Exim) and milter (Postfix, Sendmail).

    The model stays loaded, so a message costs a millisecond, not a process. Verdicts are
    'predict's, the header is 'filter's, spamc -R shows 'explain'; a model changed on disk
    (train, learn, sync, restore, prune, compact) is read again at the next message, and on
    SIGHUP; SIGTERM finishes the messages under way and exits. One line a message is
    logged: id, user, verdict, log-odds, milliseconds. See docs/serving.md.

    \b
    Example:
      nbspam serve -m spam.nbm --listen spamd:unix:/run/nbspam/spamd.sock
      spamc -U /run/nbspam/spamd.sock -c < message.eml   # exit status 1: spam
      nbspam serve -m spam.nbm --listen milter:inet:127.0.0.1:11332 --milter-action spam=reject
      nbspam serve -m spam.nbm --check
    """
    from ..serve.server import DEFAULT_ALLOW, DEFAULT_LISTEN, Config, Listener, check
    from ..serve.server import serve as run

    try:
        mode = int(socket_mode, 8)
    except ValueError:
        raise click.BadParameter(
            f"{socket_mode!r} is not octal", param_hint="--socket-mode"
        ) from None
    actions = {}
    for spec in milter_actions:
        verdict, _, action = spec.partition("=")
        actions[verdict] = action
    config = Config(
        model=model_path,
        user_models=user_models,
        listen=[Listener.parse(spec) for spec in listen or (DEFAULT_LISTEN,)],
        socket_mode=mode,
        socket_group=socket_group,
        allow=list(allow or DEFAULT_ALLOW),
        max_size=max_size,
        max_connections=max_connections,
        timeout=timeout,
        idle_timeout=idle_timeout,
        allow_tell=allow_tell,
        milter_actions=actions,
        recipient_delimiter=recipient_delimiter,
        syslog=syslog,
    )
    lines = check(config)
    if check_only:
        for line in lines:
            emit(line)
        emit("configuration OK")
        return
    run(config)


def main() -> None:
    """Entry point of the ``nbspam`` command and ``python -m nbspam``."""
    if isinstance(sys.stdout, io.TextIOWrapper):
        # a file name that is not UTF-8 is written as its own bytes, as ls and find do
        sys.stdout.reconfigure(errors="surrogateescape")
    cli(prog_name="nbspam")
