"""JSON codec for task outputs, inputs and flow configs.

Task outputs are journalled as JSON, never pickles, so a store is safe to open and a resumed
run reads records written by older code. Dataclasses and pydantic models round-trip by a
type name (`module:QualName`); decoding rebuilds only types on the allow-list
(`artifacts/journal.py`: alignflow's records, and those a flow module registers with
`@journal_record`) and never imports or looks up anything a store names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import sys
from typing import Any

from alignflow.artifacts.journal import journal_record as _allow
from alignflow.artifacts.journal import registered
from alignflow.errors import FlowError

_TAG = "__type__"
# Modules that moved (old -> new): journals written before a move still decode.
MOVED_MODULES = {
    "alignflow.flows.rl_config": "alignflow.flows.rl.config",
    "alignflow.flows.offline_config": "alignflow.flows.offline.config",
    "alignflow.flows.loops_config": "alignflow.flows.loops.config",
    "alignflow.tasks.rl.records": "alignflow.tasks.steps.records",
    "alignflow.tasks.rl.generate": "alignflow.tasks.steps.generate",
    "alignflow.tasks.rl.prompts": "alignflow.tasks.steps.prompts",
    "alignflow.tasks.rl.models:RLModelConfig": "alignflow.tasks.modeling.model_config:RLModelConfig",
    "alignflow.tasks.rl.models:PlacementConfig": "alignflow.tasks.plan.placement:PlacementConfig",
    "alignflow.tasks.steps.placement": "alignflow.tasks.plan.placement",
    "alignflow.tasks.trainers.ds_section:LoraSection": "alignflow.tasks.modeling.lora:LoraConfig",
    "alignflow.tasks.engines.vllm_section": "alignflow.tasks.engines.vllm.config",
    "alignflow.tasks.offline.config:Plan": "alignflow.tasks.trainers.plan:Plan",
    # issue 27: the engine's folders (journal, control, ray), vLLM and DeepSpeed folders
    "alignflow.flows.runs": "alignflow.flows.journal.runs",
    "alignflow.flows.lease": "alignflow.flows.journal.lease",
    "alignflow.flows.timers": "alignflow.flows.journal.timers",
    "alignflow.flows.commit_queue": "alignflow.flows.journal.commit_queue",
    "alignflow.flows.codec": "alignflow.flows.journal.codec",
    "alignflow.flows.identity": "alignflow.flows.journal.identity",
    "alignflow.flows.static_hashes": "alignflow.flows.journal.static_hashes",
    "alignflow.flows.progress_log": "alignflow.flows.journal.progress_log",
    "alignflow.flows.procinfo": "alignflow.flows.journal.procinfo",
    "alignflow.flows.api": "alignflow.flows.control.api",
    "alignflow.flows.runner": "alignflow.flows.control.runner",
    "alignflow.flows.driver": "alignflow.flows.control.driver",
    "alignflow.flows.wrapper": "alignflow.flows.control.wrapper",
    "alignflow.flows.loader": "alignflow.flows.control.loader",
    "alignflow.flows.rerun": "alignflow.flows.control.rerun",
    "alignflow.flows.reconfigure": "alignflow.flows.control.reconfigure",
    "alignflow.flows.planning": "alignflow.flows.control.planning",
    "alignflow.flows.registry": "alignflow.flows.control.registry",
    "alignflow.flows.removal": "alignflow.flows.control.removal",
    "alignflow.flows.heartbeat": "alignflow.flows.control.heartbeat",
    "alignflow.flows.executors": "alignflow.flows.ray.executors",
    "alignflow.flows.groups": "alignflow.flows.ray.groups",
    "alignflow.flows.worker_host": "alignflow.flows.ray.worker_host",
    "alignflow.flows.workers": "alignflow.flows.ray.workers",
    "alignflow.flows.ray_local": "alignflow.flows.ray.local",
    "alignflow.flows.ray_connect": "alignflow.flows.ray.connect",
    "alignflow.flows.ray_pool": "alignflow.flows.ray.pool",
    "alignflow.flows.aliases": "alignflow.flows.compat.aliases",
    "alignflow.flows.shared_steps": "alignflow.flows.rl.shared_steps",
    "alignflow.tasks.engines.vllm": "alignflow.tasks.engines.vllm.engine",
    "alignflow.tasks.engines.vllm_actor": "alignflow.tasks.engines.vllm.actor",
    "alignflow.tasks.engines.vllm_api": "alignflow.tasks.engines.vllm.api",
    "alignflow.tasks.engines.vllm_broadcast": "alignflow.tasks.engines.vllm.broadcast",
    "alignflow.tasks.engines.vllm_config": "alignflow.tasks.engines.vllm.config",
    "alignflow.tasks.engines.vllm_placement": "alignflow.tasks.engines.vllm.placement",
    "alignflow.tasks.engines.vllm_process": "alignflow.tasks.engines.vllm.process",
    "alignflow.tasks.engines.vllm_weights": "alignflow.tasks.engines.vllm.weights",
    "alignflow.tasks.engines.vllm_worker": "alignflow.tasks.engines.vllm.worker",
    "alignflow.tasks.trainers.deepspeed_checkpoint": "alignflow.tasks.trainers.deepspeed.checkpoint",
    "alignflow.tasks.trainers.deepspeed_config": "alignflow.tasks.trainers.deepspeed.config",
    "alignflow.tasks.trainers.deepspeed_trainer": "alignflow.tasks.trainers.deepspeed.trainer",
    "alignflow.tasks.trainers.ds_section": "alignflow.tasks.trainers.deepspeed.section",
    # issue 25: config sections and specs the driver reads, out of the modules that import torch
    "alignflow.tasks.rl.evaluate:RLEvalConfig": "alignflow.tasks.rl.eval_config:RLEvalConfig",
    "alignflow.tasks.rl.evaluate:RLCkptConfig": "alignflow.tasks.rl.eval_config:RLCkptConfig",
    "alignflow.tasks.rl.ptx:PtxConfig": "alignflow.tasks.rl.learn_config:PtxConfig",
    "alignflow.tasks.steps.generate:RolloutConfig": "alignflow.tasks.steps.rollout_config:RolloutConfig",
    "alignflow.tasks.steps.prompts:DataConfig": "alignflow.tasks.data.source:DataConfig",
    "alignflow.tasks.rl.episodes:EpisodeOutput": "alignflow.tasks.rl.async_records:EpisodeOutput",
}


def type_name(cls: type) -> str:
    """The name a record type is journalled under. Types of a script run as `__main__` are
    named after the module that script becomes when a resume loads it by path."""
    module = cls.__module__
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if module == "__main__" and main_file:
        from alignflow.artifacts.usercode import module_name_for

        module = module_name_for(main_file)
    return f"{module}:{cls.__qualname__}"


def register_type(cls: type, name: str | None = None) -> type:
    """Allow a dataclass / pydantic model in journals under the name it is journalled with
    (usable as a decorator; a script's types are named after its resume module). Public as
    `alignflow.journal_record`."""
    return _allow(cls, name or type_name(cls))


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
    """The name a journalled type has now (types that moved keep decoding)."""
    for _ in range(8):  # a type may have moved more than once
        module, _, qualname = MOVED_MODULES.get(name, name).partition(":")
        moved, name = name, f"{MOVED_MODULES.get(module, module)}:{qualname}"
        if name == moved:
            break
    return name


# alignflow's own record modules (torch-free): a driver that names its task bodies without
# importing them (`flows/lazyref.py`) still decodes their outputs. A fixed list: a journal
# never chooses what is imported.
OWN_RECORDS = ("alignflow.artifacts.parquet_io", "alignflow.tasks.steps.records",
               "alignflow.tasks.offline.records", "alignflow.tasks.loops.records",
               "alignflow.tasks.rl.async_records", "alignflow.tasks.plan.records",
               "alignflow.tasks.plan.cluster", "alignflow.tasks.plan.hosts",
               "alignflow.tasks.trainers.plan", "alignflow.flows.campaign.records")


def lookup_type(name: Any, where: str = "") -> type:
    """The allowed record type journalled as `name` (a type that moved is found under its
    new name); `FlowError` naming the file and the type for anything else."""
    found = registered(current_name(name)) if isinstance(name, str) else None
    if found is None and isinstance(name, str):
        for module in OWN_RECORDS:
            importlib.import_module(module)
        found = registered(current_name(name))
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
