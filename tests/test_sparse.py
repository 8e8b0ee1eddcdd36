"""scipy.sparse is imported, and a model trained, without the numpy submodules they never use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = """
import sys, numpy
listed, everything = dir(numpy), list(numpy.__all__)
import nbspam.models.model
print(sorted(m for m in ("numpy.f2py", "numpy.testing", "numpy.ma") if m in sys.modules))
print(dir(numpy) == listed, numpy.__all__ == everything, "f2py" in dir(numpy))
print(numpy.testing.__name__)  # still loaded on first use
"""


def test_importing_the_models_loads_no_unused_numpy_submodule_and_restores_numpy():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["[]", "True True True", "numpy.testing"]


TRAIN = """
import sys
from pathlib import Path
from nbspam.core.settings import build_settings
from nbspam.mail.message import Problems
from nbspam.mail.messages import read_labelled
from nbspam.fit.training import train
messages = list(read_labelled([str(Path({root!r}) / "sample_data" / "train")], Problems()))
model = train(messages, build_settings({{}}))
assert model.calibration is not None  # the internal cross-validation ran
print(sorted(m for m in ("numpy.f2py", "numpy.testing", "numpy.ma") if m in sys.modules))
"""


def test_training_loads_no_unused_numpy_submodule():
    # numpy 2's np.unique, for one, imports numpy.ma (7 ms) on its first call
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run(
        [sys.executable, "-c", TRAIN.format(root=root)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["[]"]
