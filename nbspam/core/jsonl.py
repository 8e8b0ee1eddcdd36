"""JSON Lines that give back a file name's bytes: what `predict -f jsonl`, `filter
--report` and `evaluate --scores` write."""

from __future__ import annotations

import json
import re


def json_line(value: object, **options: object) -> str:
    """``json.dumps(value, ensure_ascii=False)``, but lone surrogates (a file name's bytes
    that are not UTF-8) written as ``\\udcxx`` escapes: the line is valid UTF-8, and
    ``os.fsencode(json.loads(line)["path"])`` gives back the name's bytes."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return re.sub(_SURROGATE, lambda m: f"\\u{ord(m.group()):04x}", text)


# compiled on first use (and kept by re): the text output of scoring one message needs none
_SURROGATE = "[\ud800-\udfff]"
