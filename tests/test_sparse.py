"""scipy.sparse is imported without the numpy submodules it never uses."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys, numpy
listed, everything = dir(numpy), list(numpy.__all__)
import nbspam.model
print(sorted(m for m in ("numpy.f2py", "numpy.testing", "numpy.ma") if m in sys.modules))
print(dir(numpy) == listed, numpy.__all__ == everything, "f2py" in dir(numpy))
print(numpy.testing.__name__)  # still loaded on first use
"""


def test_importing_the_models_loads_no_unused_numpy_submodule_and_restores_numpy():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["[]", "True True True", "numpy.testing"]
