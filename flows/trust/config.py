"""A stored run's config, decoded strictly: what the store holds is what the run runs.

Credentials in a config (URL passwords, `?token=` values) are stored masked (`stored_form`);
a resume gets each back only from this machine (`restore_masked`: the same value given
again with `--trust`), or the config keeps them as `${NAME}` references to the environment.

A typed config is rebuilt from run.json by the flow's own config class (so keys renamed
since, aliases, still load), and anything else is an error naming the file and the key
path: a record whose type is not the class the field declares (a `__type__` planted in the
config is never silently replaced by defaults), a key the class does not have, a bad
value. What the run trains — its models, data and rewards — is recorded at start
(`identity`) and a resume whose config decodes to something else is refused.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from alignflow.artifacts.redact import redact, redact_tree
from alignflow.errors import ConfigError, FlowError
from alignflow.flows.config import from_dict, known_part, to_dict
from alignflow.flows.config.types import init_fields, key_of, retired, section
from alignflow.flows.journal import codec, runs
from alignflow.flows.seams import FlowConfig
from alignflow.flows.tracking.config import WandbConfig, holds_key

_TAG = "__type__"
_WANDB = codec.type_name(WandbConfig)
# Leaf keys that say what a run trains: a config that decodes to other values is refused.
IDENTITY_LEAVES = frozenset({"model_name_or_path", "prompt_dataset", "dataset",
                             "pretrain_data", "sources", "remote_url", "rewards", "flow"})


def decode_config(meta: dict, cls: type | None) -> Any:
    """The run's config for the current code, decoded strictly (`FlowError` naming
    `runs/<id>/run.json` and the key for anything the flow's config class does not hold)."""
    value, where = meta.get("config"), runs.run_json(meta["run_id"])
    _no_stored_key(value, where, "")
    if cls is None or not isinstance(value, dict) or _TAG not in value:
        return codec.decode(value, where)
    if codec.current_name(str(value[_TAG])) != codec.type_name(cls):
        raise FlowError(f"{where}: the config is a {value[_TAG]!r}, not the flow's "
                        f"config class {codec.type_name(cls)!r}")
    _check_records(value, cls, where, "")
    data, dropped = known_part(cls, codec.untag(value))
    unknown = [k for k in dropped if k not in retired(cls)]
    if unknown:
        raise FlowError(f"{where}: config key {unknown[0]!r} is not a key of "
                        f"{cls.__name__}" + (f" (nor {', '.join(map(repr, unknown[1:]))})"
                                             if unknown[1:] else "") + "; expected the keys "
                        "of the flow's config class (`alignflow run FLOW --help-config`)")
    if dropped:
        print(f"alignflow: run {meta['run_id']}: keys alignflow no longer has are ignored: "
              f"{', '.join(dropped)}", file=sys.stderr)
    try:
        return from_dict(cls, data)
    except ConfigError as exc:
        raise FlowError(f"{where}: {exc}") from None


def _no_stored_key(value: Any, where: str, key: str) -> None:
    """A W&B key is never stored (a config keeps it in the process that was given it), so
    one in a stored config was planted: refused before any config object is built."""
    if isinstance(value, list):
        for item in value:
            _no_stored_key(item, where, key)
    if not isinstance(value, dict):
        return
    fields = value.get("fields")
    if codec.current_name(str(value.get(_TAG, ""))) == _WANDB and isinstance(fields, dict) \
            and holds_key(fields.get("key")):
        raise FlowError(f"{where}: config key '{key}key' holds a W&B API key, which alignflow "
                        "never stores; expected 'true' (give the key with --use_wandb KEY or "
                        "$WANDB_API_KEY on this machine)")
    for name, sub in (fields if isinstance(fields, dict) else value).items():
        _no_stored_key(sub, where, f"{key}{name}.")


def _check_records(value: dict, cls: type | None, where: str, prefix: str) -> None:
    """Every record in `value` (a record of `cls`, None: a section the class has renamed)
    is one of alignflow's: a foreign type is refused naming the key. A record of another
    alignflow class (a section of an older layout) passes here; its keys are then checked by
    the current class (`from_dict`), which knows the old names."""
    fields = value.get("fields")
    if not isinstance(fields, dict):
        raise FlowError(f"{where}: config key '{prefix.rstrip('.') or '(root)'}' holds a "
                        "record without fields; expected a mapping")
    declared = {f.name: hint for f, hint in init_fields(cls)} if cls else {}
    keys = {f.name: key_of(f) for f in dataclasses.fields(cls)} if cls else {}
    for name, sub in fields.items():
        key = f"{prefix}{keys.get(name, name)}"
        expected = section(declared[name]) if name in declared else None
        if isinstance(sub, dict) and _TAG in sub:
            if not codec.current_name(str(sub[_TAG])).startswith("alignflow."):
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


def identity(config: FlowConfig) -> dict[str, Any]:
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


def check_identity(meta: dict, config: FlowConfig) -> None:
    """Refuse a config that decodes to other models, data or rewards than recorded."""
    recorded = meta.get("identity")
    if not isinstance(recorded, dict):
        return  # a run started before identities were recorded
    now = redact_tree(codec.encode(identity(config)))
    if not isinstance(now, dict):  # never: an identity encodes to a dict
        now = {}
    differ = sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))
    if differ:
        shown = "; ".join(f"{k}: recorded {recorded.get(k)!r}, decodes to {now.get(k)!r}"
                          for k in differ)
        raise FlowError(f"{runs.run_json(meta['run_id'])}: the stored config decodes to "
                        f"another model, dataset or reward than the run started with ({shown})")


def stored_form(config: FlowConfig) -> tuple[Any, list[list]]:
    """(the config as run.json stores it: credentials masked, the JSON paths masked)."""
    encoded = codec.encode(config)
    masked = redact_tree(encoded)
    return masked, list(_differences(encoded, masked, []))


def _differences(a: Any, b: Any, path: list) -> Any:
    if isinstance(a, dict):
        for key in a:
            yield from _differences(a[key], b[key], [*path, key])
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _differences(x, y, [*path, i])
    elif a != b:
        yield path


def restore_masked(meta: dict, given: set[str] | frozenset[str]) -> dict:
    """`meta` with each masked credential put back from a `given` item (a `--trust` value
    that masks to it); `FlowError` naming each key still masked."""
    paths = meta.get("masked") or []
    if not paths:
        return meta
    config, missing = _copy(meta.get("config")), []
    for path in paths:
        node = config
        for step in path[:-1]:
            node = node[step]
        value = node[path[-1]]
        parts = [_given_for(part, given) for part in str(value).split(",")]
        known = [part for part in parts if part is not None]
        if len(known) < len(parts):
            missing.append(f"config key '{_dotted(path)}' holds a credential stored masked "
                           f"({value!r}); give it again: --trust '<the value>' (or start runs "
                           "with ${NAME} in its place: the value stays in the environment)")
        else:
            node[path[-1]] = ",".join(known)
    if missing:
        from alignflow.flows.trust.check import untrusted

        raise untrusted(str(meta.get("run_id")), missing)
    return dict(meta, config=config)


def _given_for(part: str, given: set[str] | frozenset[str]) -> str | None:
    if "***" not in part and "<redacted $" not in part:
        return part  # this part held no credential
    found = [g for g in given if redact(g) == part]
    return found[0] if found else None


def _dotted(path: list) -> str:
    return ".".join(str(p) for p in path if p not in ("fields", "__dict__") and
                    not isinstance(p, int))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
