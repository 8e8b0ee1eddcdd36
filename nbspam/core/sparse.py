"""scipy.sparse for nbspam's modules (``from .sparse import sp``), imported without the
numpy submodules it never uses.

scipy 1.17 bundles array-api-compat, which makes its numpy namespace with ``from numpy
import *`` and with ``hasattr`` on every name ``dir(numpy)`` lists. numpy lists its
submodules in both (``__all__`` and ``dir``) before it has loaded them, and loads one on
first access, so importing scipy.sparse would also import numpy.f2py, numpy.testing,
numpy.ma, numpy.polynomial and more: about 70 ms, twice what scipy.sparse itself takes, in
every command that trains, evaluates or explains. While scipy.sparse is imported here,
numpy's ``__all__`` and ``dir(numpy)`` list only what numpy has loaded; then both are put
back, and the submodules still load on first use. Only scipy's copy keeps the short list:
its numpy namespace for the array API lacks f2py, testing, ma, random and the like, which
no array-API code and nothing in scipy.sparse reads.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np


def _import_sparse() -> ModuleType:
    saved = {name: np.__dict__[name] for name in ("__all__", "__dir__") if name in np.__dict__}
    loaded = np.__dict__.__contains__
    try:
        if "__all__" in saved:  # what `from numpy import *` takes
            np.__all__ = list(filter(loaded, saved["__all__"]))
        if "__dir__" in saved:  # numpy's module-level __dir__ (PEP 562)
            np.__dir__ = lambda: list(filter(loaded, saved["__dir__"]()))
        import scipy.sparse
    finally:
        np.__dict__.update(saved)
    return scipy.sparse


sp = _import_sparse()
