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
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATE = re.compile("[\ud800-\udfff]")
