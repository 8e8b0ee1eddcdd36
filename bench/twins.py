"""What each fast twin of nbspam pays: the twin beside the code it stands in for, in one run.

nbspam keeps four pieces of code that do what a library or a plainer path already does,
only faster. Each is worth its upkeep only while this measurement shows it pays:

| twin | stands in for | measured as |
|---|---|---|
| the MIME fast path (`mailparse`) | the `email` package | CPU time to parse every message of the corpus |
| the ASCII word and address patterns (`tokenizer`) | the `regex` patterns | CPU time to find the words of every ASCII body; the import of `regex` |
| the one-message start (`fast_start`) | the click command | a cold start scoring one message on stdin |
| importing scipy.sparse without numpy's unused submodules (`sparse`) | `import scipy.sparse` | a cold import |

    python bench/twins.py ../shared/corpora/spamassassin
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nbspam.mail import mailparse  # noqa: E402
from nbspam.text import tokenizer

ROOT = Path(__file__).resolve().parents[1]


def best_cpu(func, repeats: int = 3) -> float:
    """The least CPU time of ``repeats`` calls of func()."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        func()
        times.append(time.process_time() - start)
    return min(times)


def median_walls(
    first: list[str], second: list[str], runs: int, stdin: bytes = b""
) -> tuple[float, float]:
    """The median wall times of ``runs`` fresh processes of each command, run in turns so
    that both see the same load."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for command, kept in zip((first, second), times):
            start = time.perf_counter()
            subprocess.run(command, input=stdin, stdout=subprocess.DEVNULL, check=True)
            kept.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def mime(messages: list[bytes]) -> tuple[float, float, float]:
    """(seconds with the fast path, seconds with the email package alone, share of the
    messages the fast path reads)."""
    prepared = [mailparse._prepare(m, 200_000) for m in messages]

    def fast() -> None:
        for data, complete in prepared:
            if mailparse._fast_parse(data, 200_000, complete) is None:
                mailparse._parse(data, 200_000, complete)

    def email_package() -> None:
        for data, complete in prepared:
            mailparse._parse(data, 200_000, complete)

    read = sum(mailparse._fast_parse(d, 200_000, c) is not None for d, c in prepared)
    return best_cpu(fast), best_cpu(email_package), read / len(prepared)


def words(messages: list[bytes]) -> tuple[float, float]:
    """(seconds with the ASCII patterns, seconds with the regex ones) over the ASCII bodies."""
    bodies = [mailparse.parse_mail(m, max_body_chars=200_000).body for m in messages]
    ascii_bodies = [b for b in bodies if b.isascii()]
    unicode_word = tokenizer._UNICODE.word
    unicode_address = tokenizer._UNICODE.address

    def with_ascii() -> None:
        for body in ascii_bodies:
            tokenizer._ASCII_WORD_RE.findall(body)
            tokenizer._ASCII_ADDRESS_RE.findall(body)

    def with_regex() -> None:
        for body in ascii_bodies:
            unicode_word.findall(body)
            unicode_address.findall(body)

    return best_cpu(with_ascii), best_cpu(with_regex)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="a folder with ham/ and spam/")
    parser.add_argument("--starts", type=int, default=15, help="cold starts of each command")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        print(f"{args.corpus}: not found, nothing measured", file=sys.stderr)
        return
    paths = sorted(p for p in args.corpus.glob("*/*") if p.parent.name in ("ham", "spam"))
    messages = [p.read_bytes() for p in paths]
    python, n = sys.executable, args.starts
    print("| twin | with it | without | it pays | what |")
    print("|---|---:|---:|---:|---|")

    def row(name: str, with_it: float, without: float, what: str, unit: str = "s") -> None:
        scale, fmt = (1e3, ".0f") if unit == "ms" else (1, ".2f")
        cells = [f"{with_it * scale:{fmt}} {unit}", f"{without * scale:{fmt}} {unit}"]
        print(f"| {name} | {' | '.join(cells)} | {without / with_it:.1f}x | {what} |")

    fast, slow, share = mime(messages)
    row("MIME fast path", fast, slow, f"{len(messages):,} messages, {share:.0%} read fast")
    ascii_s, regex_s = words(messages)
    row("ASCII patterns", ascii_s, regex_s, "words and addresses of the ASCII bodies")
    plain, loaded = median_walls([python, "-c", "import re"], [python, "-c", "import regex"], n)
    row("  no regex import", plain, loaded, "python -c 'import re', 'import regex'", "ms")
    with tempfile.TemporaryDirectory() as tmp:
        model = str(Path(tmp) / "m.nbm")
        train = [python, "-m", "nbspam", "train", str(ROOT / "sample_data" / "train")]
        subprocess.run([*train, "-o", model], check=True, stderr=subprocess.DEVNULL)
        message = (ROOT / "sample_data" / "new" / "001.eml").read_bytes()
        predict = [python, "-m", "nbspam", "predict", "-m", model]
        # an option that fast_start.py does not know sends the command through click
        quick, clicked = median_walls(predict, [*predict, "--jobs", "1"], n, message)
    row("one-message start", quick, clicked, "predict < one message, cold starts", "ms")
    patched, whole = median_walls(
        [python, "-c", "import nbspam.core.sparse"], [python, "-c", "import numpy, scipy.sparse"], n
    )
    row("sparse import", patched, whole, "nbspam.core.sparse, numpy and scipy.sparse", "ms")


if __name__ == "__main__":
    main()
