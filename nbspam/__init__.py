"""nbspam: a Naive Bayes spam and text classifier that is exact, fast and easy to inspect.

The Python API (docs/python.md)::

    import nbspam

    model = nbspam.train(["spam=spam.mbox", "ham=Maildir"], event_model="multinomial")
    model.predict(b"Subject: cheap meds")[0].verdict

Its names are imported on first use (PEP 562), so that ``import nbspam`` stays cheap for a
mail filter started for every delivery: it imports neither numpy nor scipy.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "train": "api",
    "load": "api",
    "evaluate": "api",
    "Classifier": "api",
    "TableClassifier": "api",
    "SkippedInputWarning": "api",
    "Prediction": "models.decision",
    "NbspamError": "errors",
    "ConfigError": "errors",
    "InputError": "errors",
    "ModelFileError": "errors",
    "TrainingError": "errors",
    "LockError": "errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nbspam' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
