"""Filtering mail unattended: a verdict header on one message, or mail folders sorted by verdict.

One message (`filter_single`): the message comes out byte for byte as it went in, with one
header line ``X-Nbspam-Status: <verdict>; log_odds=<+n.nnn>; calibrated=<p>; version=<v>``
added as its first header (after an mbox ``From `` line). The header is left out of the
message's digest (`messages.message_digest`), so a filtered message is still the message
`learn` and `forget` know. This path is scored by `array_scoring` where the model file allows, so a
filter started per delivery imports neither numpy nor scipy.

Folders (`filter_folders`): every message file of Maildirs (``cur/`` and ``new/``) and plain
folders is scored once and, if its verdict has a destination, moved there. A state file
(`FilterState`) records the digest of each message handled, so the next run handles only
new mail and leaves alone a message the user moved back. Moves never lose a message
(`move_message`): within a file system a hard link, then an unlink of the old name; across
file systems a copy flushed to disk and renamed into place, then the unlink. A run killed at
any point leaves each message in its folder, at its destination, or (for a moment) in both;
the next run recognises the copy by its digest and finishes the move.

Autolearn (`Autolearn`), as SpamAssassin's bayes_auto_learn: a message the model is very
sure of, by its calibrated probability of spam (at least 0.999: spam; at most 0.001: ham,
by default), is learned under that verdict, at the end of the run, through `update` under
the model's lock. A message the model learned before, under either label, is left alone:
autolearn never overrides what a person taught. What it does to accuracy is measured by
`nbspam evaluate --online --learn autolearn` (docs/evaluation.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager

from .. import __version__
from ..core.record import Record
from ..core.settings import HEADER_STYLES, header_style_from
from ..errors import EXIT_SKIPPED, FilterError, InputError, NbspamError, os_reason
from ..mail.headers import add_headers, one_line
from ..mail.message import BINARY, EMPTY, MAX_MESSAGE_BYTES, Message, Problems, is_binary, is_empty
from ..models.decision import UNSURE, Prediction

# The one message on stdin (`filter_stdin`) needs none of the folders' modules (the mail
# readers, the moves and the state, the lock, the report's JSON): those are imported where
# the folders are filtered, and the types here are for type checkers only, as numpy is.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .array_scoring import ArrayScorer, ModelScorer
    from .mailstore import Destination, FilterState

SPAM, HAM = "spam", "ham"
KINDS = (SPAM, UNSURE, HAM)
# -- verdicts ---------------------------------------------------------------------------------


def status_value(prediction: Prediction) -> str:
    """The value of the X-Nbspam-Status header: verdict, log-odds, calibrated probability
    (left out when the model has no calibration) and the nbspam version."""
    parts = [one_line(prediction.verdict or ""), f"log_odds={prediction.log_odds:+.3f}"]
    if prediction.calibrated is not None:
        parts.append(f"calibrated={prediction.calibrated:.4f}")
    parts.append(f"version={__version__}")
    return "; ".join(parts)


def status_headers(
    prediction: Prediction, kind: str, style: str = "nbspam"
) -> list[tuple[str, str]]:
    """The header fields a verdict adds to a message in a ``style`` of `HEADER_STYLES`, so
    that rules written for SpamAssassin or bogofilter work unchanged; ``kind`` is 'spam',
    'unsure' or 'ham' (`verdict_kind`). X-Nbspam-Status always comes last:

    - nbspam: ``X-Nbspam-Status`` (`status_value`) alone;
    - spamassassin: ``X-Spam-Flag: YES`` (spam only) and ``X-Spam-Status: Yes, score=S
      tests=NBSPAM_SPAM version=nbspam-V`` (``No`` for ham and unsure; S is the log-odds);
    - bogofilter: ``X-Bogosity: Spam, tests=nbspam, spamicity=P, version=nbspam-V``
      (``Ham``, ``Unsure``; P the calibrated probability of spam, else the logistic of the
      log-odds).
    """
    own = ("X-Nbspam-Status", status_value(prediction))
    version = f"nbspam-{__version__}"
    if style == "spamassassin":
        flag = [("X-Spam-Flag", "YES")] if kind == SPAM else []
        answer = "Yes" if kind == SPAM else "No"
        status = (
            f"{answer}, score={prediction.log_odds:.1f} tests=NBSPAM_{kind.upper()} "
            f"version={version}"
        )
        return [*flag, ("X-Spam-Status", status), own]
    if style == "bogofilter":
        p = prediction.calibrated
        if p is None:
            import math

            p = 1.0 / (1.0 + math.exp(-max(-700.0, min(700.0, prediction.log_odds))))
        bogosity = f"{kind.capitalize()}, tests=nbspam, spamicity={p:.6f}, version={version}"
        return [("X-Bogosity", bogosity), own]
    if style != "nbspam":
        raise FilterError(f"unknown header style {style!r}: one of {', '.join(HEADER_STYLES)}")
    return [own]


def require_two_classes(labels: tuple[str, ...]) -> None:
    """Refuse a model that has no spam/ham verdicts (more than two classes)."""
    if len(labels) != 2:
        raise FilterError(
            f"filter needs a two-class model (spam and ham); this one has "
            f"{len(labels)} labels: {', '.join(labels)}"
        )


def verdict_kind(verdict: str | None, positive: str | None) -> str:
    """'spam' for the positive label, 'unsure' for unsure, 'ham' for the negative label."""
    if verdict == positive:
        return SPAM
    return UNSURE if verdict == UNSURE else HAM


#: Exit statuses of ``filter --exit-status`` (bogofilter's convention).
FILTER_EXIT = {"spam": 0, "ham": 1, "unsure": 2, "error": 3}

AUTOLEARN_SPAM = 0.999
AUTOLEARN_HAM = 0.001


class Autolearn(Record):
    """Learn a message whose calibrated probability of spam is at least ``spam`` as the
    positive label, one at most ``ham`` as the negative label."""

    spam: float = AUTOLEARN_SPAM
    ham: float = AUTOLEARN_HAM

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not 0.0 <= self.ham < 0.5 < self.spam <= 1.0:
            raise FilterError(
                "the autolearn thresholds need 0 <= ham threshold < 0.5 < spam threshold "
                f"<= 1, not {self.ham!r} and {self.spam!r}"
            )

    def label(self, prediction: Prediction, labels: tuple[str, ...], positive: str) -> str | None:
        """The label to learn a scored message as, or None (not sure enough)."""
        p = prediction.calibrated
        if p is None:
            raise FilterError(
                "autolearn needs a calibrated model: train it with calibration (the default)"
            )
        if p >= self.spam:
            return positive
        if p <= self.ham:
            return next(label for label in labels if label != positive)
        return None


def learn_confident(model_path: str, confident: list[Message], layer: str | None = None) -> int:
    """Learn the labelled ``confident`` messages into the model file (through its journal,
    under its lock), or into the user ``layer`` over it, each unless it was learned before
    (under either label); the number learned."""
    from ..service.journalled import learn

    return sum(
        learn(model_path, [m], m.label, layer=layer, new_label=True, only_new=True).learned
        for m in confident
    )


def filter_stdin(
    model_path: str,
    *,
    exit_status: bool,
    misuse: str | None = None,
    autolearn: Autolearn | None = None,
    layer: str | None = None,
    style: str | None = None,
    config: str | None = None,
) -> int:
    """Pass the message on stdin to stdout with its verdict headers in ``style``
    (`status_headers`); return the exit status. Without ``style``, the style is the
    settings file ``config``'s (``header-style``), else nbspam's.

    Whatever fails (a bad model, a bug, a broken installation, binary data), the original
    bytes still go to stdout unchanged and the reason to stderr as one line ``Error: ...``.
    ``misuse`` is such a reason found before (an option that needs folders).

    Only the first `MAX_MESSAGE_BYTES` are read before the verdict, and scored (a note says
    so); the rest of a longer message is passed on after them a piece at a time. Empty
    input (`messages.is_empty`) is no message: passed on as it came, reported as skipped
    (``-: empty, not a message``), with status 3, which --exit-status gives errors too.

    With ``autolearn`` a message scored with enough confidence is then learned into the
    model (`Autolearn`, `learn_confident`); if that fails the message has still come out,
    and the error is reported as any other. With ``layer`` it is scored with that user
    layer over the model (`layers`), and learned into the layer.
    """
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    data = stdin.read(MAX_MESSAGE_BYTES + 1)
    if misuse is None and is_empty(data):
        stdout.write(data)
        stdout.flush()
        print(f"-: {EMPTY}", file=sys.stderr)
        return EXIT_SKIPPED
    output, kind, error, learned = data, None, misuse, None
    if error is None:
        try:
            if style is None:
                style = (header_style_from(config) if config else None) or "nbspam"
            output, kind, prediction, labels, positive = _filter_one(model_path, data, layer, style)
            if autolearn is not None and positive is not None:
                label = autolearn.label(prediction, labels, positive)
                if label is not None:
                    learned = Message("-", data[:MAX_MESSAGE_BYTES], label)
        except Exception as exc:  # whatever it is, the message must come out
            output, error = data, _one_line_error(exc)
    stdout.write(output)
    if len(data) > MAX_MESSAGE_BYTES:
        import shutil

        shutil.copyfileobj(stdin, stdout, 1 << 16)
        if error is None:
            print(f"note: -: scored the first {MAX_MESSAGE_BYTES >> 20} MiB", file=sys.stderr)
    stdout.flush()
    if learned is not None:
        try:
            learn_confident(model_path, [learned], layer)
        except Exception as exc:
            error = f"autolearn: {_one_line_error(exc)}"
    if error is not None:
        print(f"Error: {error}", file=sys.stderr)
        return FILTER_EXIT["error"] if exit_status else NbspamError.exit_code
    return FILTER_EXIT[kind] if exit_status else 0


def _one_line_error(exc: Exception) -> str:
    text = str(exc) if isinstance(exc, NbspamError) else f"internal error: {exc!r}"
    return " ".join(text.split("\n"))


def filter_single(model_path: str, data: bytes) -> tuple[bytes, str]:
    """(the message with its verdict header, 'spam' / 'ham' / 'unsure') for one message.

    Scored from the model file's scoring table without numpy where the file has one, else
    by the batch scorer: the same verdict either way; on its first `MAX_MESSAGE_BYTES`.
    Raises on any failure (binary data too); the caller then passes ``data`` on unchanged.
    """
    return _filter_one(model_path, data)[:2]


def _filter_one(
    model_path: str, data: bytes, layer: str | None = None, style: str = "nbspam"
) -> tuple[bytes, str, Prediction, tuple[str, ...], str | None]:
    """`filter_single`'s (message, kind), then the prediction, the model's labels and its
    positive label."""
    if is_binary(data):
        raise InputError(f"{BINARY}: passed on unscored")
    from .array_scoring import load_scorer

    scorer = load_scorer(model_path, layer)
    output, kind, prediction = filter_with(scorer, data, style=style)
    return output, kind, prediction, tuple(scorer.labels), scorer.positive


def filter_with(
    scorer: ArrayScorer | ModelScorer, data: bytes, message_id: str = "-", style: str = "nbspam"
) -> tuple[bytes, str, Prediction]:
    """(the message with its verdict header, 'spam' / 'ham' / 'unsure', the prediction) for
    one message scored by a loaded ``scorer`` on its first `MAX_MESSAGE_BYTES`: what
    `filter_single` does, for a caller that keeps the scorer (`nbspam serve`). Raises
    on binary data and on a model that is not two-class."""
    kind, prediction = verdict_with(scorer, data, message_id)
    return with_header(data, prediction, kind, style), kind, prediction


def verdict_with(
    scorer: ArrayScorer | ModelScorer, data: bytes, message_id: str = "-"
) -> tuple[str, Prediction]:
    """('spam' / 'ham' / 'unsure', the prediction) of `filter_with`, without the message
    (a verdict alone, as spamc -c asks, needs no copy of it)."""
    if is_binary(data):
        raise InputError(f"{BINARY}: passed on unscored")
    require_two_classes(scorer.labels)
    prediction = scorer.predict(message_id, data[:MAX_MESSAGE_BYTES])
    return verdict_kind(prediction.verdict, scorer.positive), prediction


def with_header(data: bytes, prediction: Prediction, kind: str, style: str = "nbspam") -> bytes:
    """The message with the verdict headers of ``style`` for ``prediction`` (of verdict
    ``kind``), as `filter` writes it."""
    return add_headers(data, status_headers(prediction, kind, style))


# -- finding the messages ---------------------------------------------------------------------


class MessageFile(Record):
    """A message file to filter; ``sub`` is 'new' or 'cur' inside a Maildir, else None;
    ``folder`` the (device, inode) of its folder when it was found (`listed_files`), the
    only folder it is moved out of."""

    path: str
    sub: str | None
    folder: tuple[int, int] | None = None


def message_files(
    paths: Iterable[str], problems: Problems, *, skip: Iterable[str] = ()
) -> Iterator[MessageFile]:
    """The message files of each path: a Maildir's ``cur/`` and ``new/``, every file below a
    folder (hidden names and Maildir ``tmp/`` left out, and the folders ``skip`` below a
    path; a symbolic link only where it stays in the path, as `folder_files` says), or a
    single message file (the file its link leads to, where it is one). An mbox is refused:
    its messages cannot be moved one by one safely. A path whose way passes a symbolic link
    of another user (`safefiles.foreign_link`) is skipped, said in one line: a user
    whose mail a job of root's filters could make their Maildir a link to /etc, whose files
    would be scored and moved out of it."""
    from ..mail.messages import listed_files, maildir_part
    from ..store.safefiles import foreign_link

    for path in paths:
        foreign = foreign_link(path)
        if foreign is not None:
            problems.skip(path, foreign)
            continue
        if os.path.isdir(path):
            for found, part, folder in listed_files(path, problems, skip=skip):
                yield MessageFile(found, part, folder)
        elif os.path.isfile(path):
            if _holds_several(path):
                raise FilterError(
                    f"{path} holds several messages (an mbox or a table): filter moves whole "
                    f"message files, so give Maildirs or folders of message files"
                )
            path = os.path.realpath(path) if os.path.islink(path) else path
            yield MessageFile(path, maildir_part(os.path.dirname(path)), _folder(path))
        else:
            problems.skip(path, "no such file or directory")


def _folder(path: str) -> tuple[int, int] | None:
    """The (device, inode) of the folder of the file ``path``, or None."""
    try:
        info = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _holds_several(path: str) -> bool:
    """True if the file ``path`` is read as several messages (an mbox or a table)."""
    from ..mail.messages import read_messages

    first = next(iter(read_messages([path], Problems())), None)
    return first is not None and first.id != path


def _read_message(path: str, problems: Problems) -> Message | None:
    """The message in the file ``path``; None (reported) if it cannot be read, holds
    several messages or is a symbolic link now (put there since it was listed)."""
    from ..mail.messages import read_file

    found = read_file(path, problems)
    message = next(found, None)
    found.close()
    if message is not None and message.id != path:
        problems.skip(path, "holds several messages (an mbox?): not filtered, left where it is")
        return None
    return message


# -- a run over folders -----------------------------------------------------------------------


class Summary:
    """What a run did: messages new to it, skipped as filtered before, moved, kept, failed;
    with autolearn, ``autolearned``: the messages sure enough to learn, each with the label
    to learn."""

    def __init__(self) -> None:
        self.new = self.skipped = self.moved = self.kept = self.errors = 0
        self.autolearned: list[Message] = []

    def line(self, *, dry_run: bool = False) -> str:
        moved = "would be moved" if dry_run else "moved"
        return (
            f"filter: {self.new:,} new, {self.skipped:,} skipped (filtered before), "
            f"{self.moved:,} {moved}, {self.kept:,} kept, {self.errors:,} error(s)"
        )


if TYPE_CHECKING:
    Report = Callable[[dict[str, Any]], None]


class Plan(Record):
    """How to filter: a destination per verdict kind (spam / unsure / ham), dry run or not."""

    destinations: Mapping[str, Destination]
    dry_run: bool = False


def filter_folders(
    scorer: ArrayScorer | ModelScorer,
    paths: Iterable[str],
    moves: Mapping[str, str | None],
    *,
    state_path: str,
    dry_run: bool = False,
    problems: Problems | None = None,
    report: Report | None = None,
    progress: Callable[[int], None] | None = None,
    lock_timeout: float | None = None,
    jobs: int = 1,
    autolearn: Autolearn | None = None,
    model_path: str | None = None,
) -> Summary:
    """Filter the message files of Maildirs and folders; see the module docstring.

    ``moves`` maps 'spam', 'unsure' and 'ham' to a destination folder (or None: keep).
    Messages whose digest the state file lists are skipped. Each new message is scored,
    moved if its verdict has a destination, and recorded in the state file; ``report`` gets
    one record per new message (path, verdict, log_odds, probability, action, destination).
    Unreadable or unmovable messages are reported through ``problems`` and left where they
    are. A dry run moves nothing and writes no state. The state file's lock is held for the
    whole run, so two runs never handle the same message. With ``autolearn`` the new
    messages sure enough to learn are listed in the summary's ``autolearned`` (the caller
    learns them: `learn_confident`; a dry run lists them too). The state file and its lock
    are made with the permissions of the file at ``model_path`` (`safefiles`).
    """
    from contextlib import nullcontext

    from ..store.lock import DEFAULT_TIMEOUT, model_lock
    from .mailstore import FilterState, open_destination, remove_leftovers

    require_two_classes(scorer.labels)
    unknown = set(moves) - set(KINDS)
    if unknown:
        raise FilterError(f"unknown verdict {sorted(unknown)[0]!r}: use one of {KINDS}")
    destinations = {
        kind: open_destination(path, create=not dry_run) for kind, path in moves.items() if path
    }
    run = _Run(scorer, Plan(destinations, dry_run), problems or Problems(), report, progress)
    run.autolearn = autolearn
    beside = model_path or state_path
    timeout = DEFAULT_TIMEOUT if lock_timeout is None else lock_timeout
    locked = model_lock(state_path, timeout=timeout, beside=beside)
    with nullcontext() if dry_run else locked:
        state = FilterState(state_path, write=not dry_run, beside=beside)
        try:
            if not dry_run:
                for destination in destinations.values():
                    remove_leftovers(destination)
            skip = [d.root for d in destinations.values()]
            run.filter(message_files(paths, run.problems, skip=skip), state, jobs)
        finally:
            state.close()
    return run.summary


class _Run:
    """One pass over the message files: read, skip what the state knows, score, act, record."""

    def __init__(
        self,
        scorer: ArrayScorer | ModelScorer,
        plan: Plan,
        problems: Problems,
        report: Report | None,
        progress: Callable[[int], None] | None,
    ) -> None:
        self.scorer = scorer
        self.plan = plan
        self.report = report or (lambda record: None)
        self.progress = progress or (lambda n: None)
        self.summary = Summary()
        self.problems = _ReportedProblems(problems, self._failed)
        from collections import deque

        self.pending: deque[tuple[MessageFile, bytes]] = deque()  # read, not yet scored
        self.queued: set[bytes] = set()  # their digests
        self.autolearn: Autolearn | None = None
        self.data: dict[bytes, bytes] = {}  # with autolearn: the bytes of the pending ones

    def filter(self, files: Iterable[MessageFile], state: FilterState, jobs: int = 1) -> None:
        """Score the new messages a chunk at a time (by ``jobs`` workers, in order) and act
        on each as soon as it is scored."""
        new = self._new_messages(files, state)
        for prediction in self.scorer.predict_messages(new, jobs=jobs):
            file, digest = self.pending.popleft()
            self.queued.discard(digest)
            self._act(file, digest, prediction, state)
            if self.autolearn is not None:
                data = self.data.pop(digest)
                positive = self.scorer.positive
                label = self.autolearn.label(prediction, tuple(self.scorer.labels), positive)
                if label is not None:
                    self.summary.autolearned.append(Message(file.path, data, label))
            self.progress(1)

    def _new_messages(self, files: Iterable[MessageFile], state: FilterState) -> Iterator[Message]:
        """The messages not filtered before (nor waiting in this run's chunk), each noted in
        ``pending`` with its file and digest."""
        from ..mail.headers import message_digest

        for file in files:
            message = _read_message(file.path, self.problems)
            if message is None:
                continue
            digest = message_digest(message.data)
            if digest in state or digest in self.queued:
                self.summary.skipped += 1
                continue
            self.summary.new += 1
            self.pending.append((file, digest))
            self.queued.add(digest)
            if self.autolearn is not None:
                self.data[digest] = message.data
            yield message

    def _act(
        self, file: MessageFile, digest: bytes, prediction: Prediction, state: FilterState
    ) -> None:
        kind = verdict_kind(prediction.verdict, self.scorer.positive)
        destination = self.plan.destinations.get(kind)
        try:
            action, where = self._move(file, digest, destination)
        except OSError as exc:  # left where it is, not recorded: the next run tries again
            self.summary.errors += 1
            to = f" to {destination.root}" if destination else ""
            self.problems.parent.skip(file.path, f"not moved{to}: {os_reason(exc)}")
            self._record(file.path, prediction, "error", None)
            return
        if action == "kept":
            self.summary.kept += 1
        else:
            self.summary.moved += 1
        state.record(digest, prediction.verdict)
        self._record(file.path, prediction, action, where)

    def _move(
        self, file: MessageFile, digest: bytes, destination: Destination | None
    ) -> tuple[str, str | None]:
        """(action, where the message is or would be) for one scored message."""
        from .mailstore import find_copy, finish_move, holds, move_message

        destinations = self.plan.destinations.values()
        copy = find_copy(file.path, file.sub, digest, destinations, listed=file.folder)
        if copy is not None:  # an interrupted run got this far: finish its move
            if not self.plan.dry_run:
                finish_move(file.path, listed=file.folder)
            return ("would move" if self.plan.dry_run else "moved"), copy
        if destination is None or holds(destination, file.path, file.sub):
            return "kept", None
        if self.plan.dry_run:
            return "would move", destination.folder_for(file.sub)
        moved = move_message(file.path, file.sub, destination, digest, listed=file.folder)
        return "moved", moved

    def _record(
        self, path: str, prediction: Prediction | None, action: str, where: str | None
    ) -> None:
        self.report(
            {
                "path": path,
                "verdict": prediction.verdict if prediction else None,
                "log_odds": prediction.log_odds if prediction else None,
                "calibrated": prediction.calibrated if prediction else None,
                "action": action,
                "destination": where,
            }
        )

    def _failed(self, where: str) -> None:
        """A file could not be read: count it and give it a report line."""
        self.summary.errors += 1
        self._record(where, None, "error", None)


class _ReportedProblems(Problems):
    """Problems passed on to the caller's, each skipped input also counted as an error."""

    def __init__(self, parent: Problems, failed: Callable[[str], None]) -> None:
        super().__init__()
        self.parent = parent
        self._failed = failed

    def skip(self, where: str, reason: str) -> None:
        self.parent.skip(where, reason)
        self._failed(where)

    def note(self, text: str) -> None:
        self.parent.note(text)


@contextmanager
def report_writer(path: str | None, *, stdout: Callable[[str], None]) -> Iterator[Report | None]:
    """A `Report` writing each record as a JSON line: appended to the file ``path`` (flushed
    line by line, so a killed run keeps what it reported; a line that cannot be written
    whole, on a full disk, is cut off again, never left half), or passed to ``stdout`` for
    '-'; None without a path.

    The file is opened as a state file is (`safefiles.open_side_file`): never through a
    symbolic link, and refused if it is a FIFO, a device or a file with other hard links,
    where a neighbour who may write its folder would have had root append lines (holding
    names of their choosing) to a file of root's, or where a symbolic link of another user
    lies on its way (`safefiles.check_link_owners`: a folder of theirs made a link to
    /etc), or where another user made the name first in a folder anyone may write
    (`trust.check_made`: root's lines went into her file); a new one gets the mode of a
    new model."""
    if path is None:
        yield None
        return
    from ..core.jsonl import json_line
    from ..core.trust import check_made
    from ..store.safefiles import check_link_owners, open_side_file

    if path == "-":
        yield lambda record: stdout(json_line(record))
        return
    check_link_owners(path, "report")
    check_made(path, "report")
    try:
        fd = open_side_file(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, what="report")
    except OSError as exc:
        raise FilterError(f"cannot write report {path}: {os_reason(exc)}") from None

    def write(record: dict[str, Any]) -> None:
        try:
            _append_line(fd, json_line(record).encode() + b"\n")
        except OSError as exc:
            raise FilterError(f"cannot write report {path}: {os_reason(exc)}") from None

    try:
        yield write
    finally:
        os.close(fd)


def _append_line(fd: int, line: bytes) -> None:
    """Append ``line`` to the file open at ``fd`` (O_APPEND) whole, in as many writes as
    the system takes; where one fails, what was written of it is cut off again, unless
    another writer appended meanwhile, and the OSError raised."""
    start = os.fstat(fd).st_size
    view, written = memoryview(line), 0
    try:
        while written < len(line):
            written += os.write(fd, view[written:])
    except OSError:
        try:
            if written and os.fstat(fd).st_size == start + written:
                os.ftruncate(fd, start)
        except OSError:
            pass  # the failure to tell is the write's
        raise


def filter_paths(
    model_path: str,
    paths: Iterable[str],
    moves: Mapping[str, str | None],
    *,
    state_path: str,
    dry_run: bool = False,
    problems: Problems | None = None,
    report: Report | None = None,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
    autolearn: Autolearn | None = None,
) -> list[str]:
    """`nbspam filter PATH...`: `filter_folders` with the model file at ``model_path``,
    then with ``autolearn`` the messages sure enough learned into it (`learn_confident`;
    none in a dry run). Returns the lines to say: the run's summary, and what autolearn
    learned."""
    from .array_scoring import load_scorer

    scorer = load_scorer(model_path)
    summary = filter_folders(
        scorer,
        paths,
        moves,
        state_path=state_path,
        dry_run=dry_run,
        problems=problems,
        report=report,
        progress=progress,
        jobs=jobs,
        autolearn=autolearn,
        model_path=model_path,
    )
    lines = [summary.line(dry_run=dry_run)]
    if autolearn is not None:
        sure = summary.autolearned
        spam = sum(m.label == scorer.positive for m in sure)
        if dry_run:
            lines.append(f"autolearn: {len(sure):,} sure enough to learn, none learned")
        else:
            learned = learn_confident(model_path, sure)
            lines.append(
                f"autolearn: {learned:,} learned of {len(sure):,} sure enough "
                f"({spam:,} spam, {len(sure) - spam:,} ham; the rest learned before)"
            )
    return lines
