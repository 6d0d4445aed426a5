"""JSON codec for task outputs, inputs and flow configs.

Task outputs are journalled as JSON, never pickles, so a store is safe to open and a resumed
run reads records written by older code. Dataclasses and pydantic models round-trip by a
registered name (`names.py`: `alignflow.<QualName>`, a flow's `module:QualName`); decoding
rebuilds only types on the allow-list (`artifacts/journal.py`: alignflow's records, and
those a flow module registers with `@journal_record`) and never imports or looks up
anything a store names. Module paths written by older code are read through
`legacy_names.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from typing import Any

from alignflow.errors import FlowError
from alignflow.flows.journal import legacy_names, names

_TAG = "__type__"


def type_name(cls: type) -> str:
    """The name a record type is journalled under (`names.py`: `alignflow.<QualName>` for
    alignflow's records, `module:QualName` for a flow's own)."""
    return names.name_of(cls)


def register_type(cls: type, name: str | None = None) -> type:
    """Allow a dataclass / pydantic model in journals under its registered name (usable as
    a decorator; a script's types are named after its resume module). Public as
    `alignflow.journal_record`."""
    return names.register(cls, name)


journal_record = register_type


def _is_pydantic(obj: Any) -> bool:
    return hasattr(type(obj), "model_fields") and hasattr(obj, "model_dump")


def encode(obj: Any) -> Any:
    """Python record -> JSON-ready value (dicts, lists, scalars, tagged records)."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, list):
        return [encode(v) for v in obj]
    if isinstance(obj, tuple):
        return {"__tuple__": [encode(v) for v in obj]}
    if isinstance(obj, dict):
        return _encode_dict(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {_TAG: type_name(type(obj)), "fields": fields}
    if _is_pydantic(obj):
        return {_TAG: type_name(type(obj)), "fields": obj.model_dump(mode="json")}
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "ndim", 1) == 0:
        return encode(obj.item())  # numpy / torch scalars
    raise FlowError(f"cannot journal a {type(obj).__name__}: task inputs and outputs must be "
                    "dataclasses, pydantic models, dicts, lists or JSON scalars "
                    "(write tensors and rows to the store and return the ArtifactRef)")


def _encode_dict(obj: dict) -> dict:
    bad = [k for k in obj if not isinstance(k, str)]
    if bad:
        raise FlowError(f"cannot journal a dict with non-string key {bad[0]!r}; expected str keys")
    out = {k: encode(v) for k, v in obj.items()}
    if _TAG in obj or "__tuple__" in obj or "__dict__" in obj:
        return {"__dict__": out}
    return out


def decode(value: Any, where: str = "") -> Any:
    """JSON value -> Python record (inverse of `encode`); `where` (the file it was read
    from) names the file in errors."""
    if isinstance(value, list):
        return [decode(v, where) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tuple__" in value and len(value) == 1:
        return tuple(decode(v, where) for v in value["__tuple__"])
    if "__dict__" in value and len(value) == 1:
        return {k: decode(v, where) for k, v in value["__dict__"].items()}
    if _TAG in value:
        return _decode_record(value[_TAG], value.get("fields", {}), where)
    return {k: decode(v, where) for k, v in value.items()}


def current_name(name: str) -> str:
    """The registered name of a journalled type: itself, or for a module path written by
    older code, the name it has now (read once through `legacy_names`)."""
    return legacy_names.registered_name(name) if legacy_names.is_legacy(name) else name


# alignflow's own record modules (torch-free): a driver that names its task bodies without
# importing them (`flows/lazyref.py`) still decodes their outputs. A fixed list: a journal
# never chooses what is imported.
OWN_RECORDS = ("alignflow.artifacts.parquet_io", "alignflow.tasks.steps.records",
               "alignflow.tasks.offline.records", "alignflow.tasks.loops.records",
               "alignflow.tasks.rl.async_records", "alignflow.tasks.plan.records",
               "alignflow.tasks.plan.cluster", "alignflow.tasks.plan.hosts",
               "alignflow.tasks.trainers.plan", "alignflow.flows.campaign.records")


def lookup_type(name: Any, where: str = "") -> type:
    """The allowed record type journalled as `name` (an older journal's module path is
    read as the name it has now); `FlowError` naming the file and the type for anything
    else, which is never imported."""
    found = names.find(current_name(name)) if isinstance(name, str) else None
    if found is None and isinstance(name, str):
        for module in OWN_RECORDS:
            importlib.import_module(module)
        found = names.find(current_name(name))
    if found is not None:
        return found
    source = f"{where}: " if where else ""
    raise FlowError(f"{source}journal record type {name!r} is not registered: a journal "
                    "rebuilds only alignflow's records and those a flow module registers "
                    "with @alignflow.journal_record")


def _decode_record(name: str, fields: Any, where: str) -> Any:
    cls = lookup_type(name, where)
    if not isinstance(fields, dict):
        raise FlowError(f"{where}: record {name!r} has fields of type {type(fields).__name__}; "
                        "expected a mapping")
    if hasattr(cls, "model_validate"):
        return cls.model_validate(fields)
    try:
        return cls(**{k: decode(v, where) for k, v in fields.items()})
    except TypeError as exc:
        raise FlowError(f"{where}: record {name!r} does not fit its class: {exc}") from None


def untag(value: Any) -> Any:
    """A journalled value as plain JSON data: records as their field dicts, tuples as lists."""
    if isinstance(value, list):
        return [untag(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tuple__" in value and len(value) == 1:
        return [untag(v) for v in value["__tuple__"]]
    if "__dict__" in value and len(value) == 1:
        return {k: untag(v) for k, v in value["__dict__"].items()}
    if _TAG in value:
        return untag(value.get("fields", {}))
    return {k: untag(v) for k, v in value.items()}


def dumps(obj: Any) -> str:
    """Canonical JSON text of a record (sorted keys, no spaces) — stable for hashing."""
    return json.dumps(encode(obj), sort_keys=True, separators=(",", ":"))


def digest(obj: Any) -> str:
    """sha256 of the canonical JSON of a record."""
    return hashlib.sha256(dumps(obj).encode()).hexdigest()
