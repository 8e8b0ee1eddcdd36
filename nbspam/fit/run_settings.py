"""The settings of a run: the defaults, then a YAML file, then the options given, with the
stop-word choice resolved to its words.

`core.settings` defines the `Settings` types, checks them and builds them from values; the
stop words are resolved here because that needs `tokenizer` (text), a layer above core.
"""

from __future__ import annotations

from typing import Any

from ..core.settings import Settings, build_settings, load_yaml
from ..text.tokenizer import load_stop_words


def settings_from(config_file: str | None, options: dict[str, Any]) -> Settings:
    """Settings from the YAML file (if any), overridden by the options given (None: not
    given)."""
    values = load_yaml(config_file) if config_file else {}
    flags = {k: v for k, v in options.items() if v is not None}
    return resolve_settings({**values, **flags}, source=config_file or "options")


def resolve_settings(values: dict[str, Any], *, source: str) -> Settings:
    """Settings from a flat mapping of setting -> value, with the stop-word choice resolved
    to its word list, which the model masks (the tokenizer keeps stop words, so that the
    same counts serve with and without them); ``source`` names where the values came from,
    for errors."""
    settings = build_settings(values, source=source)
    words = load_stop_words(settings.stop_words, settings.tokenizer)
    return settings.replace(training=settings.training.replace(stop_words=words))
