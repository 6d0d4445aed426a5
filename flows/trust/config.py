"""A stored run's config, decoded strictly: what the store holds is what the run runs.

A typed config is rebuilt from run.json by the flow's own config class (so keys renamed
since, aliases, still load), and anything else is an error naming the file and the key
path: a record whose type is not the class the field declares (a `__type__` planted in the
config is never silently replaced by defaults), a key the class does not have, a bad
value. What the run trains — its models, data and rewards — is recorded at start
(`identity`) and a resume whose config decodes to something else is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from alignflow.errors import ConfigError, FlowError
from alignflow.flows import codec, runs
from alignflow.flows.config import from_dict, to_dict
from alignflow.flows.config.types import init_fields, key_of, section

_TAG = "__type__"
# Leaf keys that say what a run trains: a config that decodes to other values is refused.
IDENTITY_LEAVES = frozenset({"model_name_or_path", "prompt_dataset", "dataset",
                             "pretrain_data", "sources", "remote_url", "rewards", "flow"})


def decode_config(meta: dict, cls: type | None) -> Any:
    """The run's config for the current code, decoded strictly (`FlowError` naming
    `runs/<id>/run.json` and the key for anything the flow's config class does not hold)."""
    value, where = meta.get("config"), runs.run_json(meta["run_id"])
    if cls is None or not isinstance(value, dict) or _TAG not in value:
        return codec.decode(value, where)
    if codec.current_name(str(value[_TAG])) != codec.type_name(cls):
        raise FlowError(f"{where}: the config is a {value[_TAG]!r}, not the flow's "
                        f"config class {codec.type_name(cls)!r}")
    _check_records(value, cls, where, "")
    try:
        return from_dict(cls, codec.untag(value))
    except ConfigError as exc:
        raise FlowError(f"{where}: {exc}") from None


def _check_records(value: dict, cls: type, where: str, prefix: str) -> None:
    """Every record in `value` (a record of `cls`) sits where `cls` declares that class."""
    fields = value.get("fields")
    if not isinstance(fields, dict):
        raise FlowError(f"{where}: config key '{prefix.rstrip('.') or '(root)'}' holds a "
                        "record without fields; expected a mapping")
    declared = {f.name: hint for f, hint in init_fields(cls)}
    keys = {f.name: key_of(f) for f in dataclasses.fields(cls)}
    for name, sub in fields.items():
        key = f"{prefix}{keys.get(name, name)}"
        expected = section(declared[name]) if name in declared else None
        if isinstance(sub, dict) and _TAG in sub:
            if expected is None or codec.current_name(str(sub[_TAG])) != codec.type_name(expected):
                want = f"a {codec.type_name(expected)!r} section" if expected else "a value"
                raise FlowError(f"{where}: config key '{key}' holds a {sub[_TAG]!r} record; "
                                f"expected {want}")
            _check_records(sub, expected, where, f"{key}.")
        else:
            _no_records(sub, where, key)


def _no_records(value: Any, where: str, key: str) -> None:
    """A plain value holds no records at all (only sections are records)."""
    if isinstance(value, list):
        for item in value:
            _no_records(item, where, key)
    elif isinstance(value, dict):
        if _TAG in value:
            raise FlowError(f"{where}: config key '{key}' holds a {value[_TAG]!r} record; "
                            "expected a plain value")
        for sub_key, item in value.items():
            _no_records(item, where, f"{key}.{sub_key}")


def identity(config: Any) -> dict[str, Any]:
    """What the run trains: every model, dataset, reward and flow key of `config`."""
    found: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        for name, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{name}.")
            elif name in IDENTITY_LEAVES and value not in (None, "", []):
                found[f"{prefix}{name}"] = value
    data = to_dict(config)
    if isinstance(data, dict):
        walk(data, "")
    return found


def check_identity(meta: dict, config: Any) -> None:
    """Refuse a config that decodes to other models, data or rewards than recorded."""
    recorded = meta.get("identity")
    if not isinstance(recorded, dict):
        return  # a run started before identities were recorded
    now = codec.encode(identity(config))
    differ = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    if differ:
        shown = "; ".join(f"{k}: recorded {recorded.get(k)!r}, decodes to {now.get(k)!r}"
                          for k in differ)
        raise FlowError(f"{runs.run_json(meta['run_id'])}: the stored config decodes to "
                        f"another model, dataset or reward than the run started with ({shown})")
