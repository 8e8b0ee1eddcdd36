"""Speed of nbspam beside the scikit-learn pipeline, as whole processes run from files.

Both tools run in the same benchmark on the same 80/20 split of each corpus (the first fold
of scikit-learn's StratifiedKFold(5, shuffle=True, random_state=42) over the message files
sorted by path, as in bench/cv.py). Every measurement is a fresh process, started the way a
user starts it:

- nbspam: ``nbspam train DIR -o MODEL`` (DIR holds one subfolder per label) and
  ``nbspam predict -m MODEL DIR``, with its default settings (e-mail parsing on: auto);
- the reference: a short script that reads the files as bytes, decodes them as latin-1 and
  fits ``CountVectorizer() + MultinomialNB()`` (then ``joblib.dump``), or loads that pipeline
  with ``joblib.load`` and prints ``predict_proba`` for each message, one line per message.

Phases: training on the train files; batch scoring of the test files and of every file of
the corpus; scoring the test files five times over (nbspam only: with the same contents and
five times the messages, it shows whether scoring memory grows with the number of
messages); the cold start of ``nbspam predict -m MODEL < one-message`` beside the reference
scoring the same message, ``python -c "import numpy"`` and ``python -c pass``. Each process
is timed on the wall clock; its CPU time and peak resident memory come from ``wait4``, and
the memory of its worker processes is sampled from /proc. Runs of the two tools alternate,
and the tables show medians. nbspam runs with its default number of jobs unless ``--jobs``
is given (and only where its ``--help`` offers the option).

    python bench/speed.py                          # both corpora, 3 repeats, 15 cold starts
    python bench/speed.py --quick                  # smoke run on 300 messages per corpus
    python bench/speed.py --corpus ../shared/corpora/spamassassin --repeats 5 --json out.json

The driver itself imports only the standard library, so that it stays small: a child's peak
memory would otherwise include that of the process it was started from.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPORA = REPO.parent / "shared" / "corpora"
DEFAULT_CORPORA = [CORPORA / "spamassassin", CORPORA / "sms-spam-collection"]
NBSPAM, REFERENCE, BOGOFILTER = "nbspam", "scikit-learn", "bogofilter"
#: A ratio this much worse than the last recorded one fails the run (--history).
TOLERANCE = 0.10
DEPTH = 5
"""The recent rows of a corpus whose median each ratio is compared with."""
#: The ratios kept in the history: (name, phase, other tool, measure); each is nbspam's
#: median over the other tool's, lower is better for nbspam.
RATIOS = (
    ("train / bogofilter", "train", BOGOFILTER, "seconds"),
    ("score / bogofilter", "score_test", BOGOFILTER, "seconds"),
    ("train / scikit-learn", "train", REFERENCE, "seconds"),
    ("score / scikit-learn", "score_test", REFERENCE, "seconds"),
    ("train memory / bogofilter", "train", BOGOFILTER, "tree_peak_mb"),
)
HISTORY_MARK = "<!-- ratio history: bench/speed.py --history appends one row per corpus here -->"
QUICK_MESSAGES = 300

# Runs one command and prints its wall time, exit status, CPU time and memory as JSON.
#   argv: STDIN STDOUT STDERR COMMAND...
# The command is started from this small process (with posix_spawn), so that its peak
# memory is its own and not that of the benchmark. Two measures of memory:
# - peak_mb: ru_maxrss from wait4, the peak resident set of the largest single process of
#   the command (itself or a worker process it waited for);
# - tree_peak_mb: the largest sum, over the command and all its descendants, of their
#   proportional set sizes (PSS: pages shared between processes, as after a fork, are
#   split between them), sampled every 50 ms. This counts worker processes.
# CPU seconds are user + system time of the command and the processes it waited for. The
# sampling itself takes CPU from the cores the command runs on (sampler_cpu_seconds), which
# would slow a command using every core more than a single-threaded one: it walks the
# command's process tree through /proc/PID/task/*/children rather than reading all of /proc.
MEASURE = r"""
import json, os, sys, threading, time
stdin, stdout, stderr, *argv = sys.argv[1:]
write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
actions = [
    (os.POSIX_SPAWN_OPEN, 0, stdin, os.O_RDONLY, 0),
    (os.POSIX_SPAWN_OPEN, 1, stdout, write, 0o644),
    (os.POSIX_SPAWN_OPEN, 2, stderr, write, 0o644),
]
finished = threading.Event()
tree_peak_kb = 0


def children(pid):  # from /proc/PID/task/*/children: no scan of all of /proc
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(child) for child in f.read().split()]
    return found


def descendants(root):
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        try:
            todo += children(pid)
        except (OSError, ValueError):
            pass
    return found


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def sample(root):
    global tree_peak_kb
    while not finished.wait(0.05):
        tree_peak_kb = max(tree_peak_kb, sum(pss_kb(pid) for pid in descendants(root)))


start = time.perf_counter()
pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
sampler = threading.Thread(target=sample, args=(pid,), daemon=True)
sampler.start()
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
finished.set()
sampler.join()
own = os.times()
print(json.dumps({
    "seconds": seconds,
    "status": os.waitstatus_to_exitcode(status),
    "cpu_seconds": usage.ru_utime + usage.ru_stime,
    "peak_mb": usage.ru_maxrss / 1024,
    "tree_peak_mb": tree_peak_kb / 1024,
    "sampler_cpu_seconds": own.user + own.system,
}))
"""

# The scikit-learn reference, written to a temporary folder when the benchmark runs.
REFERENCE_SCRIPT = '''\
"""scikit-learn reference: CountVectorizer() + MultinomialNB() on files decoded as latin-1.

    python reference.py train DIR MODEL      DIR holds one subfolder per label
    python reference.py score MODEL PATH...  files or folders; '-' is one message on stdin
"""

import sys
from pathlib import Path

import joblib
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import make_pipeline


def files(path):
    path = Path(path)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    return [path]


def train(root, model):
    texts, labels = [], []
    for folder in sorted(p for p in Path(root).iterdir() if p.is_dir()):
        for path in files(folder):
            texts.append(path.read_bytes().decode("latin-1"))
            labels.append(folder.name)
    pipeline = make_pipeline(CountVectorizer(), MultinomialNB()).fit(texts, labels)
    joblib.dump(pipeline, model)


def score(model, paths):
    pipeline = joblib.load(model)
    names, texts = [], []
    for arg in paths or ["-"]:
        if arg == "-":
            names.append("-")
            texts.append(sys.stdin.buffer.read().decode("latin-1"))
            continue
        for path in files(arg):
            names.append(str(path))
            texts.append(path.read_bytes().decode("latin-1"))
    classes = list(pipeline.classes_)
    lines = []
    for name, row in zip(names, pipeline.predict_proba(texts)):
        best = int(row.argmax())
        probabilities = "\\t".join(f"{c}={p:.6g}" for c, p in zip(classes, row))
        lines.append(f"{name}\\t{classes[best]}\\t{probabilities}\\n")
    sys.stdout.write("".join(lines))


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3])
    else:
        score(sys.argv[2], sys.argv[3:])
'''

# bogofilter, as its users train and score mail files: -n (ham) and -s (spam) with -B (the
# arguments are files), into a fresh word list; -v -B prints one line per message. Its exit
# status is its last verdict (0 spam, 1 ham, 2 unsure); 3 is an error.
#   sh bogofilter.sh train WORDLIST DIR     DIR holds ham/ and spam/
#   sh bogofilter.sh score WORDLIST DIR     every file of DIR
BOGOFILTER_SCRIPT = """\
if [ "$1" = train ]; then
  rm -rf "$2" && mkdir "$2" || exit 3
  bogofilter -d "$2" -n -B "$3"/ham/*; [ $? -lt 3 ] || exit 3
  bogofilter -d "$2" -s -B "$3"/spam/*; [ $? -lt 3 ] || exit 3
else
  bogofilter -d "$2" -v -B "$3"/*; [ $? -lt 3 ] || exit 3
fi
"""

# The split, in a child process so that the benchmark never imports scikit-learn itself.
# stdin: {"labels": [...], "limit": N or null}; stdout: indices of the kept and test messages.
SPLIT = r"""
import json, sys
import numpy as np
import sklearn
from sklearn.model_selection import StratifiedKFold, train_test_split
request = json.load(sys.stdin)
labels = np.array(request["labels"])
keep = np.arange(len(labels))
if request["limit"] and request["limit"] < len(labels):
    keep, _ = train_test_split(
        keep, train_size=request["limit"], stratify=labels, random_state=42
    )
    keep = np.sort(keep)
skf = StratifiedKFold(5, shuffle=True, random_state=42)
_, test = next(iter(skf.split(np.zeros(len(keep)), labels[keep])))
print(json.dumps({
    "keep": keep.tolist(), "test": keep[test].tolist(), "sklearn": sklearn.__version__
}))
"""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Runner:
    """Runs commands through MEASURE, each with its stdout and stderr kept in a file.

    Children run with Python's default bytecode caching, the cache kept in the work folder
    (PYTHONPYCACHEPREFIX), so that after one warm-up run every command starts from compiled
    modules, as it does on a user's machine, and nothing is written into the source tree.
    """

    def __init__(self, python: str, work: Path) -> None:
        self.python = python
        self.work = work
        self.count = 0
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        self.env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")

    def run(self, argv: list[str], stdin: str = os.devnull) -> tuple[dict, Path]:
        """Run argv; returns its measurements and the file holding its stdout."""
        self.count += 1
        out = self.work / f"out-{self.count}.txt"
        err = self.work / f"err-{self.count}.txt"
        done = subprocess.run(
            [self.python, "-I", "-S", "-c", MEASURE, stdin, str(out), str(err), *argv],
            capture_output=True,
            text=True,
            check=True,
            env=self.env,
        )
        result = json.loads(done.stdout)
        if result["status"] != 0:
            tail = err.read_text(errors="replace").strip().splitlines()[-5:]
            raise SystemExit(
                f"exit status {result['status']}: {' '.join(argv)}\n" + "\n".join(tail)
            )
        err.unlink()
        return result, out


def corpus_files(root: Path) -> list[tuple[Path, str]]:
    """(file, label) for the files of root/<label>/, sorted by path, as bench/cv.py reads them."""
    files = sorted(
        p
        for p in root.glob("*/*")
        if p.is_file() and p.parent.name in ("ham", "spam") and not p.name.startswith(".")
    )
    return [(p, p.parent.name) for p in files]


def split(python: str, labels: list[str], limit: int | None) -> dict:
    done = subprocess.run(
        [python, "-c", SPLIT],
        input=json.dumps({"labels": labels, "limit": limit}),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def link_tree(folder: Path, files: list[tuple[Path, str]], by_label: bool, copies: int = 1) -> None:
    """Symbolic links to the corpus files: folder/<label>/<name>, or folder/<name>; with
    copies > 1, each file that many times (as <k>-<name>)."""
    names = [p.name for p, _ in files]
    unique = len(set(names)) == len(names)
    for k in range(1, copies + 1):
        for path, label in files:
            name = path.name if unique else f"{label}-{path.name}"
            name = f"{k}-{name}" if copies > 1 else name
            target = folder / label / name if by_label else folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path.resolve())


def read_all(files: list[tuple[Path, str]]) -> None:
    """Read every file once, so that no tool pays for the first read from disk."""
    for path, _ in files:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def supports_jobs(nbspam: str, command: str) -> bool:
    done = subprocess.run([nbspam, command, "--help"], capture_output=True, text=True)
    return "--jobs" in done.stdout


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def commands(tools: dict, folder: Path) -> tuple[dict, dict]:
    """The timed commands on the trees below folder: per phase and tool, and the cold starts.

    The phase score_test_x5 (nbspam only) scores each test message five times, to see
    whether memory grows with the number of messages when their contents do not change.
    """
    nbspam, python, ref = tools["nbspam"], tools["python"], tools["reference"]
    model = {NBSPAM: str(folder / "model.nbm"), REFERENCE: str(folder / "model.joblib")}
    jobs = {c: ["--jobs", str(tools["jobs"][c])] for c in tools["jobs"]}
    links = ["--follow-links"]  # the trees are links to the corpus, out of their folder
    phases = {"train": "train", "score_test": "test", "score_all": "all"}
    batch = {
        phase: {
            NBSPAM: (
                [nbspam, "train", str(folder / "train"), "-o", model[NBSPAM]]
                if phase == "train"
                else [nbspam, "predict", "-m", model[NBSPAM], str(folder / tree)]
            )
            + links
            + jobs.get("train" if phase == "train" else "predict", []),
            REFERENCE: (
                [python, ref, "train", str(folder / "train"), model[REFERENCE]]
                if phase == "train"
                else [python, ref, "score", model[REFERENCE], str(folder / tree)]
            ),
        }
        for phase, tree in phases.items()
    }
    if tools.get("bogofilter"):
        bogo = ["/bin/sh", tools["bogofilter"]]
        wordlist = str(folder / "bogofilter")
        for phase, tree in phases.items():
            verb = "train" if phase == "train" else "score"
            batch[phase][BOGOFILTER] = [*bogo, verb, wordlist, str(folder / tree)]
    # memory against the number of messages: the test messages five times over
    batch["score_test_x5"] = {
        NBSPAM: [nbspam, "predict", "-m", model[NBSPAM], str(folder / "test_x5")]
        + links
        + jobs.get("predict", [])
    }
    cold = {
        NBSPAM: [nbspam, "predict", "-m", model[NBSPAM]],
        REFERENCE: [python, ref, "score", model[REFERENCE]],
        "python -c pass": [python, "-c", "pass"],
        'python -c "import numpy"': [python, "-c", "import numpy"],
    }
    return batch, cold


def warm_up(files: list[tuple[Path, str]], tools: dict, runner: Runner) -> None:
    """Run every command once on a few messages, untimed, to fill the bytecode cache."""
    folder = runner.work / "warm-up"
    few = [f for label in ("ham", "spam") for f in [g for g in files if g[1] == label][:10]]
    link_tree(folder / "train", few, by_label=True)
    link_tree(folder / "test", few[:3], by_label=False)
    link_tree(folder / "all", few[:3], by_label=False)
    link_tree(folder / "test_x5", few[:3], by_label=False, copies=5)
    batch, cold = commands(tools, folder)
    for phase in batch.values():
        for argv in phase.values():
            runner.run(argv)
    for argv in cold.values():
        runner.run(argv, stdin=str(few[0][0]))


def bench_corpus(root: Path, args: argparse.Namespace, tools: dict, runner: Runner) -> dict:
    everything = corpus_files(root)
    chosen = split(tools["python"], [label for _, label in everything], args.limit)
    tools["sklearn"] = chosen["sklearn"]
    files = [everything[i] for i in chosen["keep"]]
    test_set = set(chosen["test"])
    test = [everything[i] for i in chosen["test"]]
    train = [everything[i] for i in chosen["keep"] if i not in test_set]
    size = {path: os.path.getsize(path) for path, _ in files}

    def sizes(group):
        return len(group), sum(size[path] for path, _ in group) / 1e6

    folder = runner.work / root.name
    link_tree(folder / "train", train, by_label=True)
    link_tree(folder / "test", test, by_label=False)
    link_tree(folder / "all", files, by_label=False)
    link_tree(folder / "test_x5", test, by_label=False, copies=5)
    read_all(files)
    if not (runner.work / "warm-up").exists():
        log("warming up: every command once on a few messages")
        warm_up(files, tools, runner)
    # the cold start scores the test message of median size
    one = sorted(test, key=lambda f: (size[f[0]], str(f[0])))[len(test) // 2]
    batch, cold = commands(tools, folder)
    n_test, mb_test = sizes(test)
    counts = {
        "train": sizes(train),
        "score_test": (n_test, mb_test),
        "score_all": sizes(files),
        "score_test_x5": (5 * n_test, 5 * mb_test),
    }

    runs: dict[str, dict[str, list[dict]]] = {p: {t: [] for t in batch[p]} for p in batch}
    notes: list[str] = []
    for repeat in range(args.repeats):
        tools_run = [NBSPAM, REFERENCE, BOGOFILTER]  # each first in turn
        order = tools_run[repeat % 3 :] + tools_run[: repeat % 3]
        for phase, argvs in batch.items():
            n = counts[phase][0]
            for tool in (t for t in order if t in argvs):
                result, out = runner.run(argvs[tool])
                result["source"] = source_digest()
                runs[phase][tool].append(result)
                lines = count_lines(out)
                out.unlink()
                if phase != "train" and lines != n:
                    notes.append(f"{tool} {phase}: {lines} output lines for {n} messages")
                log(
                    f"{root.name:<20} {phase:<13} {tool:<12} {repeat + 1}/{args.repeats} "
                    f"{result['seconds']:7.2f} s {result['peak_mb']:7.1f} MB "
                    f"{result['tree_peak_mb']:7.1f} MB all processes"
                )

    cold_runs: dict[str, list[dict]] = {name: [] for name in cold}
    names = list(cold)
    for repeat in range(args.cold_repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            result, out = runner.run(cold[name], stdin=str(one[0]))
            out.unlink()
            result["source"] = source_digest()
            cold_runs[name].append(result)
    log(f"{root.name:<20} cold start {args.cold_repeats} x {len(names)} runs done")

    return {
        "corpus": root.name,
        "path": str(root),
        "messages": {**counts, "one": (1, size[one[0]] / 1e6)},
        "cold_start_message": one[0].name,
        "runs": runs,
        "cold_start": cold_runs,
        "notes": sorted(set(notes)),
    }


def median(results: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in results)


def num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def megabytes(x: float) -> str:
    return f"{x:.3f} MB" if x < 1 else f"{x:.2f} MB" if x < 10 else f"{x:.1f} MB"


def summarise(corpus: dict) -> dict:
    """Medians per phase and tool, with throughput derived from the median time."""
    out: dict = {}
    for phase, tools in corpus["runs"].items():
        n, mb = corpus["messages"][phase]
        out[phase] = {}
        for tool, results in tools.items():
            seconds = median(results, "seconds")
            out[phase][tool] = {
                "seconds": seconds,
                "messages_per_s": n / seconds,
                "mb_per_s": mb / seconds,
                "cpu_seconds": median(results, "cpu_seconds"),
                "peak_mb": median(results, "peak_mb"),
                "tree_peak_mb": median(results, "tree_peak_mb"),
            }
    out["cold_start"] = {
        name: {key: median(r, key) for key in r[0] if key not in ("status", "source")}
        for name, r in corpus["cold_start"].items()
    }
    return out


def table(corpus: dict, medians: dict) -> list[str]:
    m = corpus["messages"]
    lines = [
        f"### {corpus['corpus']}: {m['score_all'][0]:,} messages, {megabytes(m['score_all'][1])}",
        "",
        "| phase | measure | nbspam | reference | nbspam / reference |",
        "|---|---|---:|---:|---:|",
    ]
    titles = {"train": "train", "score_test": "score", "score_all": "score"}
    measures = [
        ("messages_per_s", "messages/s"),
        ("mb_per_s", "MB/s"),
        ("seconds", "seconds"),
        ("cpu_seconds", "CPU seconds"),
        ("peak_mb", "peak MB, largest process"),
        ("tree_peak_mb", "peak MB, all processes"),
    ]
    for phase, verb in titles.items():
        n, mb = m[phase]
        title = f"{verb}, {n:,} messages ({megabytes(mb)})"
        ours, theirs = medians[phase][NBSPAM], medians[phase][REFERENCE]
        for i, (key, label) in enumerate(measures):
            lines.append(
                f"| {title if i == 0 else ''} | {label} | {num(ours[key])} | {num(theirs[key])} "
                f"| {ours[key] / theirs[key]:.2f} |"
            )
    cold = medians["cold_start"]
    ours = cold[NBSPAM]
    kb = m["one"][1] * 1000
    for name in [REFERENCE, 'python -c "import numpy"', "python -c pass"]:
        title = f"cold start, one message ({kb:.1f} kB) on stdin, vs `{name}`"
        for j, (key, label) in enumerate(
            [("seconds", "seconds"), ("peak_mb", "peak MB, largest process")]
        ):
            lines.append(
                f"| {title if j == 0 else ''} | {label} | {num(ours[key])} "
                f"| {num(cold[name][key])} | {ours[key] / cold[name][key]:.2f} |"
            )
    return lines


def targets(corpus: dict, medians: dict) -> tuple[list[str], dict]:
    """The targets of the benchmark, each with its numbers and whether it is met."""
    m = corpus["messages"]
    checks = {}
    for phase, what in (("train", "training"), ("score_test", "batch scoring")):
        ratio = (
            medians[phase][NBSPAM]["messages_per_s"] / medians[phase][REFERENCE]["messages_per_s"]
        )
        checks[f"{phase} >= 3x"] = (
            ratio >= 3,
            f"{what} at least 3x the reference's messages/s: {ratio:.2f}x",
        )
    cold = medians["cold_start"]
    ours, numpy_ = cold[NBSPAM]["seconds"], cold['python -c "import numpy"']["seconds"]
    checks["cold start <= import numpy"] = (
        ours <= numpy_,
        f'cold start no slower than `python -c "import numpy"`: {ours:.3f} s vs {numpy_:.3f} s',
    )
    once = medians["score_test"][NBSPAM]["tree_peak_mb"]
    five = medians["score_test_x5"][NBSPAM]["tree_peak_mb"]
    checks["scoring memory flat"] = (
        five <= once + max(5.0, 0.1 * once),
        f"scoring memory flat in the number of messages (the test messages scored five times "
        f"over take at most 10 % or 5 MB more than once): {once:.0f} MB for "
        f"{m['score_test'][0]:,} messages, {five:.0f} MB for {m['score_test_x5'][0]:,} "
        f"(all processes; one message: {cold[NBSPAM]['peak_mb']:.0f} MB, the whole corpus: "
        f"{medians['score_all'][NBSPAM]['tree_peak_mb']:.0f} MB)",
    )
    lines = [f"- {'met' if ok else '**not met**'}: {text}" for ok, text in checks.values()]
    return lines, {name: ok for name, (ok, _) in checks.items()}


def ratios(medians: dict) -> dict[str, float]:
    """nbspam's median over the other tool's for each of `RATIOS` whose tools both ran."""
    out = {}
    for name, phase, other, key in RATIOS:
        runs = medians.get(phase, {})
        if NBSPAM in runs and other in runs and runs[other][key] > 0:
            out[name] = runs[NBSPAM][key] / runs[other][key]
    return out


def ratio_lines(corpus: str, found: dict[str, float]) -> list[str]:
    """The ratios of one corpus as a Markdown table (lower is better for nbspam)."""
    lines = [
        f"| {corpus} | nbspam / other, same run |",
        "|---|---:|",
    ]
    return lines + [f"| {name} | {value:.2f}x |" for name, value in found.items()]


def regressions(
    current: dict[str, float], last: dict[str, float], tolerance: float = TOLERANCE
) -> list[str]:
    """Each ratio of ``current`` more than ``tolerance`` above the one of ``last`` (ratios
    are nbspam over another tool, lower is better), as
    'NAME 1.45x, the recent median 1.20x (+21%)'."""
    out = []
    for name, value in current.items():
        before = last.get(name)
        if before and value > before * (1 + tolerance):
            out.append(
                f"{name} {value:.2f}x, the recent median {before:.2f}x (+{value / before - 1:.0%})"
            )
    return out


def history_rows(text: str) -> list[dict]:
    """The rows of the ratio history below `HISTORY_MARK` in ``text``: date, commit, corpus,
    verdict and one value per ratio of `RATIOS` (None where the ratio was not measured)."""
    if HISTORY_MARK not in text:
        return []
    rows = []
    for line in text.split(HISTORY_MARK, 1)[1].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| ") or len(cells) != 4 + len(RATIOS) or cells[0] == "date":
            continue
        if set(cells[0]) <= set("-:"):
            continue
        values = [float(c.rstrip("x")) if c not in ("", "-") else None for c in cells[3:-1]]
        rows.append(
            {
                "date": cells[0],
                "commit": cells[1],
                "corpus": cells[2],
                "ratios": {name: v for (name, *_), v in zip(RATIOS, values) if v is not None},
                "verdict": cells[-1],
            }
        )
    return rows


def recent_median(rows: list[dict], corpus: str, depth: int = DEPTH) -> dict[str, float]:
    """Each ratio's median over the last ``depth`` rows of ``corpus`` that measured it,
    whatever their verdict. The last good row as the reference made one quick bogofilter
    run (fe158d7's) the bar of every run after it: it flagged all eleven runs since, most
    with nbspam's own times unchanged (their rows' notes say so); against the median of
    five, four of those eleven. One quick or one slow run does not move the median; a change
    that lasts (in nbspam, or in the tools beside it) is flagged until it is the median,
    three runs later."""
    out = {}
    for name, *_ in RATIOS:
        values = [r["ratios"][name] for r in rows if r["corpus"] == corpus and name in r["ratios"]]
        if values:
            out[name] = statistics.median(values[-depth:])
    return out


def history_header() -> list[str]:
    names = [name for name, *_ in RATIOS]
    return [
        HISTORY_MARK,
        "",
        "| date | commit | corpus | " + " | ".join(names) + " | verdict |",
        "|---|---|---|" + "---:|" * len(names) + "---|",
    ]


def append_history(path: Path, date: str, commit: str, results: list[dict]) -> list[str]:
    """Compare each corpus's ratios with their recent median in ``path`` (bench/RESULTS.md,
    `recent_median`) and append a row for each; returns the regressions found."""
    text = path.read_text() if path.exists() else ""
    rows = history_rows(text)
    found, lines = [], []
    for corpus in results:
        current = corpus["ratios"]
        worse = regressions(current, recent_median(rows, corpus["corpus"]))
        found += [f"{corpus['corpus']}: {w}" for w in worse]
        cells = [f"{current[n]:.2f}x" if n in current else "-" for n, *_ in RATIOS]
        verdict = "regression: " + "; ".join(worse) if worse else "ok"
        lines.append(
            f"| {date} | {commit} | {corpus['corpus']} | " + " | ".join(cells) + f" | {verdict} |"
        )
    if HISTORY_MARK not in text:
        text = text.rstrip("\n") + "\n\n## Ratio history\n\n" + "\n".join(history_header()) + "\n"
    path.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n")
    return found


def revision() -> str:
    """The commit of the checkout, whether the package has uncommitted changes, and a digest
    of the package's files (which tells whether they changed while the benchmark ran)."""
    git = ["git", "--no-optional-locks", "-C", str(REPO)]
    commit = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    status = subprocess.run([*git, "status", "--porcelain", "--", "nbspam"], capture_output=True)
    if commit and status.stdout.strip():
        commit += " with uncommitted changes"
    source = f"source digest {source_digest()}"
    return f"commit {commit}, {source}" if commit else source


def source_digest() -> str:
    """A digest of the files of the package in this checkout."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "nbspam").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def machine(tools: dict, commit: str) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(x.split(":", 1)[1].strip() for x in f if x.startswith("model name"))
    except (OSError, StopIteration):
        pass
    version = subprocess.run(
        [tools["nbspam"], "--version"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{version} ({commit}), scikit-learn {tools['sklearn']}, "
        f"Python {platform.python_version()}, {cpu}, {os.cpu_count()} CPUs, {platform.system()}"
    )


def without_json(argv: list[str]) -> list[str]:
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--json":
            skip = True
        elif not arg.startswith("--json="):
            kept.append(arg)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus",
        action="append",
        type=Path,
        metavar="PATH",
        help="a corpus with ham/ and spam/ folders (repeatable) [default: SpamAssassin and "
        "the SMS Spam Collection in ../shared/corpora]",
    )
    parser.add_argument("--repeats", type=int, help="runs of each phase and tool [default: 3]")
    parser.add_argument(
        "--cold-repeats", type=int, help="runs of each cold-start command [default: 15]"
    )
    parser.add_argument(
        "--jobs", type=int, help="passed to nbspam commands whose --help mentions --jobs"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {QUICK_MESSAGES} messages per corpus, 1 repeat, 3 cold starts",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every run here")
    parser.add_argument(
        "--history",
        type=Path,
        metavar="FILE",
        help="compare the ratios to bogofilter and scikit-learn with their median over the "
        f"last {DEPTH} rows of each corpus in FILE (bench/RESULTS.md), append this run's rows, "
        f"and exit with status 1 if any ratio is more than {TOLERANCE * 100:.0f}%% worse",
    )
    parser.add_argument(
        "--nbspam",
        default=str(Path(sys.executable).parent / "nbspam"),
        help="the nbspam command [default: nbspam next to this Python]",
    )
    args = parser.parse_args()
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.cold_repeats = args.cold_repeats or (3 if args.quick else 15)
    args.limit = QUICK_MESSAGES if args.quick else None

    tools = {"nbspam": args.nbspam, "python": sys.executable, "jobs": {}}
    if args.jobs is not None:
        tools["jobs"] = {
            c: args.jobs for c in ("train", "predict") if supports_jobs(args.nbspam, c)
        }
        if not tools["jobs"]:
            log(f"note: nbspam has no --jobs option; --jobs {args.jobs} not passed")
    corpora = []
    for root in args.corpus or DEFAULT_CORPORA:
        if (root / "ham").is_dir() and (root / "spam").is_dir():
            corpora.append(root)
        else:
            log(f"note: {root} skipped: no ham/ and spam/ folders there")
    if not corpora:
        raise SystemExit("no corpus to run on")

    # the command that makes the tables (where the JSON copy goes changes nothing in them)
    command = " ".join(["python bench/speed.py", *without_json(sys.argv[1:])])
    load = [os.getloadavg()[0]]
    commit = revision()
    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="nbspam-speed-") as tmp:
        work = Path(tmp)
        tools["reference"] = str(work / "reference.py")
        Path(tools["reference"]).write_text(REFERENCE_SCRIPT)
        if shutil.which("bogofilter"):
            tools["bogofilter"] = str(work / "bogofilter.sh")
            Path(tools["bogofilter"]).write_text(BOGOFILTER_SCRIPT)
        else:
            log(
                "note: bogofilter is not installed (apt-get install bogofilter): its ratios are skipped"
            )
        runner = Runner(sys.executable, work)
        for root in corpora:
            corpus = bench_corpus(root, args, tools, runner)
            corpus["medians"] = summarise(corpus)
            corpus["ratios"] = ratios(corpus["medians"])
            results.append(corpus)
    elapsed = time.perf_counter() - started
    load.append(os.getloadavg()[0])
    about = machine(tools, commit)
    versions = {
        r["source"]
        for corpus in results
        for runs in [*corpus["runs"].values(), corpus["cold_start"]]
        for tool_runs in runs.values()
        for r in tool_runs
    }
    changed = revision() != commit or len(versions) > 1
    if changed:
        log("warning: the nbspam source changed while the benchmark ran")

    out = [
        f"`{command}`, {elapsed / 60:.0f} min, {time.strftime('%Y-%m-%d')}: {about}; "
        f"load average {load[0]:.1f} at the start, {load[1]:.1f} at the end. "
        f"Medians of {args.repeats} interleaved runs ({args.cold_repeats} for the cold "
        f"starts). Reference: scikit-learn CountVectorizer() + MultinomialNB() on the files "
        f"decoded as latin-1. CPU seconds: user + system, worker processes included. Peak "
        f"MB, largest process: ru_maxrss; all processes: proportional set sizes of the "
        f"command and its worker processes, summed, sampled every 50 ms.",
        "",
    ]
    if changed:
        out[0] += (
            f" **The nbspam source changed while the benchmark ran:** the runs saw "
            f"{len(versions)} versions of it (each run's digest is in the JSON)."
        )
    for corpus in results:
        out += table(corpus, corpus["medians"])
        lines, corpus["targets"] = targets(corpus, corpus["medians"])
        out += ["", *lines]
        out += [f"- note: {n}" for n in corpus["notes"]]
        out += ["", *ratio_lines(corpus["corpus"], corpus["ratios"]), ""]
    print("\n".join(out).rstrip())
    worse = []
    if args.history:
        worse = append_history(
            args.history,
            time.strftime("%Y-%m-%d"),
            commit.split(",")[0].removeprefix("commit "),
            results,
        )
    if args.json:
        record = {
            "command": command,
            "seconds": elapsed,
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": about,
            "source_changed_during_run": changed,
            "load_average": load,
            "repeats": args.repeats,
            "cold_repeats": args.cold_repeats,
            "jobs": tools["jobs"],
            "corpora": results,
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n")
    if worse:
        raise SystemExit(f"speed regression above {TOLERANCE:.0%}: " + "; ".join(worse))


if __name__ == "__main__":
    main()
