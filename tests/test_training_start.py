"""Training's serial parts: what the main process does before its workers start, beside
them, and after the last chunk (docs/speed.md, "Training's serial parts")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


FORK_PROBE = """
import multiprocessing.pool, sys
from nbspam.cli.fast_start import run

init = multiprocessing.pool.Pool.__init__

def probe(pool, *args, **kwargs):
    print("forked with", sorted(m for m in ("numpy", "scipy") if m in sys.modules), file=sys.stderr)
    init(pool, *args, **kwargs)

multiprocessing.pool.Pool.__init__ = probe
sys.argv = ["nbspam", "train", *sys.argv[1:]]
run()
"""


def _copies(folder: Path, n: int) -> None:
    """n distinct copies of each sample message, under its label."""
    for source in sorted((SAMPLE / "train").glob("*/*")):
        for k in range(n):
            target = folder / source.parent.name / f"{k}-{source.name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f"X-Copy: {k}\n".encode() + source.read_bytes())


def test_train_forks_its_workers_before_importing_numpy(tmp_path):
    """numpy and scipy (some 0.3 s of CPU) are imported beside the workers, not before
    them: telling messages from a typed table imported numpy with `text.tables`."""
    _copies(tmp_path / "data", 6)
    model = tmp_path / "m.nbm"
    done = subprocess.run(
        [sys.executable, "-c", FORK_PROBE, str(tmp_path / "data"), "-o", str(model), "--jobs", "2"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "forked with []"
    assert model.exists()
