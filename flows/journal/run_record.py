"""The fields of run.json that `ls`, `status`, `tick` and a resume compute with, checked where
the record is read.

run.json is data anyone with write access to the store may have shaped. A value no driver
writes (a wake time of 1e308, a NaN or negative start, a list where the status belongs)
used to reach `time.localtime` or an f-string and fail the command for the whole store;
checked here, it is a `SchemaError` naming the file and the key, so `ls` marks that one run
UNREADABLE and lists the rest. Fields not named here are not looked at.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from alignflow.errors import SchemaError

LATEST = 253402300799  # 9999-12-31 23:59:59 UTC: the last second every platform can show
_TIME = f"a time in seconds since 1970 (0 to {LATEST}) or null"


def _number(v: Any) -> bool:
    """A JSON number that compares as one (an int of any size never becomes a float)."""
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or isinstance(v, float) and math.isfinite(v)


def _time(v: Any) -> bool:
    return v is None or _number(v) and 0 <= v <= LATEST


def _integer(v: Any, low: int = -(2**63)) -> bool:
    return v is None or isinstance(v, int) and not isinstance(v, bool) and low <= v < 2**63


def _text(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _texts(v: Any) -> bool:
    return v is None or isinstance(v, list) and all(isinstance(x, str) for x in v)


def _mapping(v: Any) -> bool:
    return v is None or isinstance(v, dict)


CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "created": (_time, _TIME), "ended": (_time, _TIME), "resumed": (_time, _TIME),
    "wake_at": (_time, _TIME), "active": (_time, "seconds >= 0 or null"),
    "drivers": (lambda v: _integer(v, 0), "a count >= 0 or null"),
    "seed": (_integer, "a 64-bit integer or null"),
    "flow": (_text, "a string or null"), "flow_ref": (_text, "a string or null"),
    "error": (_text, "a string or null"), "error_task": (_text, "a string or null"),
    "waiting_for": (_text, "a string or null"),
    "code_changed": (_texts, "a list of task keys or null"),
    "recoveries": (_mapping, "an object or null"),
}


def check_record(meta: dict, run_id: str, statuses: tuple[str, ...], where: str) -> dict:
    """`meta` as read from `where` (run.json of `run_id`); `SchemaError` naming the file and
    each key whose value no driver writes."""
    wrong = []
    if meta.get("run_id", run_id) != run_id:
        wrong.append(f"key 'run_id' is {_shown(meta['run_id'])}; expected {run_id!r} (its "
                     "folder)")
    if meta.get("status") not in statuses:
        wrong.append(f"key 'status' is {_shown(meta.get('status'))}; expected one of "
                     f"{', '.join(statuses)}")
    for key, (ok, expected) in CHECKS.items():
        if not ok(meta.get(key)):
            wrong.append(f"key {key!r} is {_shown(meta[key])}; expected {expected}")
    if wrong:
        raise SchemaError(f"{where}: {'; '.join(wrong)}")
    return meta


def _shown(value: Any) -> str:
    """A value as the error shows it: its repr, cut short (a record may hold anything)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else \
        f"an integer of {len(str(abs(value)))} digits"
    return text if len(text) <= 40 else text[:37] + "..."
