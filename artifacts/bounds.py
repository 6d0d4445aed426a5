"""How much of a store file is read, and how deep its JSON may nest: one limit per kind.

Anyone who can write to a store can make a file of any size or nesting, so no reader trusts
either: `Store.read_bytes` reads at most `limit_for(rel)` bytes (a bigger file is refused,
named, before it is read), and `parse_json` refuses JSON nested past `MAX_DEPTH`. The
numbers come from what alignflow writes (measured on a GRPO campaign run, 2026-11-26):
- run.json holds one run's config, plan, code identity, output and error: 3–9 KB, 10
  levels deep. Task manifests, lease files, events, tombstones hold one record each (a
  manifest: its output record and artifact refs, never rows): under 3 KB. `RECORD_BYTES`
  (4 MiB) is ~500× the biggest; a config that inlines data belongs in a data file.
- journal.json snapshots every manifest of a run, ~2.3 KB per task: `JOURNAL_BYTES` (256
  MiB) is a run of ~100,000 tasks. Past it the snapshot is ignored and the manifests are
  read one by one, which is always correct.
- a task log is a task's captured output, appended per attempt: `LOG_BYTES` (64 MiB).
- other JSON (checkpoint meta.json / state.json / host.json, campaign state): 1–12 KB;
  `JSON_BYTES` (64 MiB), since the parsed objects take ~8× the bytes in memory.
- anything else read whole (teacher logits, campaign inputs): a quarter of this machine's
  RAM, at least 1 GiB (`blob_bytes`). Files bigger than that are streamed, not read whole:
  Parquet and safetensors are checked against the size their manifest or meta.json records.
Nesting: alignflow's own JSON is at most ~12 levels deep; `MAX_DEPTH` (128, serde_json's
default) leaves room for user records and keeps every recursive reader of the parsed
object far from Python's recursion limit.
"""

from __future__ import annotations

import json
from typing import Any

from alignflow.errors import SchemaError, StoreFileRefused

MiB = 2**20
RECORD_BYTES = 4 * MiB
JOURNAL_BYTES = 256 * MiB
LOG_BYTES = 64 * MiB
JSON_BYTES = 64 * MiB
MAX_DEPTH = 128
_RUN_RECORDS = ("tasks", "lease", "events")


def blob_bytes() -> int:
    """The cap on a whole-file read of anything without a kind: a quarter of the RAM."""
    import psutil

    return max(2**30, int(psutil.virtual_memory().total) // 4)


def limit_for(rel: str) -> int:
    """The most bytes a read of store path `rel` may return (see the module docstring)."""
    parts = rel.strip("/").split("/")
    name = parts[-1]
    if parts[0] == "runs" and len(parts) >= 3:
        if len(parts) == 3 and name == "journal.json":
            return JOURNAL_BYTES
        if len(parts) == 3 and name.endswith(".json") or parts[2] in _RUN_RECORDS:
            return RECORD_BYTES
        if parts[2] == "logs":
            return LOG_BYTES
    return JSON_BYTES if name.endswith(".json") else blob_bytes()


def human(n: float) -> str:
    """`n` bytes, short (`4 MiB`, `1.2 GiB`)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


def too_big(where: str, size: int | None, limit: int) -> StoreFileRefused:
    """The one line for a file past its read limit (`size` None: more than `limit`)."""
    got = f"{human(size)}" if size is not None else f"more than {human(limit)}"
    return StoreFileRefused(f"{where} is {got}; a file of this kind is at most {human(limit)} "
                            "(not read)")


def parse_json(data: bytes, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """`data` parsed as JSON, nested at most `max_depth` levels; else a `SchemaError` (or
    `StoreFileRefused` for the depth) naming `where`."""
    try:
        obj = json.loads(data)
    except RecursionError:
        raise _too_deep(where, max_depth) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise SchemaError(f"{where} is not valid JSON ({_first_line(exc)})") from None
    if depth(obj, max_depth) > max_depth:
        raise _too_deep(where, max_depth)
    return obj


def depth(obj: Any, stop: int = MAX_DEPTH) -> int:
    """How deep lists and objects nest in `obj` (a scalar is 0), counted without recursion,
    one level at a time (the catalog checks 10,000 cached manifests per opening); stops
    counting past `stop`."""
    level, layer = 0, [obj]
    while layer := [item for item in layer if isinstance(item, dict | list)]:
        level += 1
        if level > stop:
            return level
        below: list[Any] = []
        for item in layer:
            below.extend(item.values() if isinstance(item, dict) else item)
        layer = below
    return level


def _too_deep(where: str, max_depth: int) -> StoreFileRefused:
    return StoreFileRefused(f"{where} nests JSON more than {max_depth} levels deep; alignflow "
                            "writes at most ~12 (not parsed)")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
