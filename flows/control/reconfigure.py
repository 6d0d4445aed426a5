"""A run continued under the config it is started with now: a re-run of the same command
(`ckpt.load_enable`, OpenRLHF's `--load_checkpoint`), a campaign's CONFIG edited since it
started. The new config is applied where the run can follow it, and every key it cannot is
refused in one line, before anything changes:

- what the run trains (its models, data and rewards: `trust.config.IDENTITY_LEAVES`);
- keys its config class lists in `RESUME_FIXED` (prefixes of keys an early task fixed for
  the rest of the run, e.g. the prompts committed once: `data.`), unless no task that
  reads them has committed yet;
- a change of the run's plan its checkpoints cannot follow (`Plan.follow`, the same check
  every resume makes), named by the keys that make it.

Everything else (learning rates, lengths, schedules, gates, logging) is followed from the
next task on, said in one `note:` line and recorded in run.json.
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from alignflow.errors import ConfigError, FlowError
from alignflow.flows.config import from_dict, to_dict
from alignflow.flows.control import planning
from alignflow.flows.journal import codec, runs
from alignflow.flows.journal.runs import RunState
from alignflow.flows.trust.config import IDENTITY_LEAVES, stored_form

Changes = dict[str, tuple[Any, Any]]


def changes(old: Any, new: Any) -> Changes:
    """dotted key -> (old value, new value) of every leaf that differs."""
    a, b = _leaves(to_dict(old)), _leaves(to_dict(new))
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix.rstrip("."): data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(_leaves(value, f"{prefix}{key}."))
    return out


def follow(state: RunState, old: Any, new: Any) -> tuple[Any, dict]:
    """(`new`, the run.json fields recording it) when the run can follow it from `old`
    (said on stderr), else `ConfigError` naming every key it cannot follow."""
    if new is old:
        return old, {}
    diff = check(state.meta, old, new, set(state.manifests))
    if not diff:
        return old, {}
    shown = ", ".join(f"{k} {_shown(*v)}" for k, v in diff.items())
    print(f"note: run {state.run_id} continues with the config given now: {shown}",
          file=sys.stderr)
    return new, {"config": stored_form(new)[0]}


def finished_output(state: RunState, admitted: Any) -> Any:
    """A finished run's output, for a command that continues it (OpenRLHF's
    --load_checkpoint finds nothing left to train and ends): the keys given now that differ
    from the run's are said, as not used."""
    print(f"run {state.run_id} already finished (ckpt.load_enable): nothing left to train",
          file=sys.stderr)
    differ = changes(admitted.stored, admitted.config)
    if differ:
        print(f"warning: config keys given now differ from run {state.run_id}'s and are not "
              f"used: {', '.join(differ)}; start a new run (another --ckpt_path or --run-id)",
              file=sys.stderr)
    return codec.decode(state.meta.get("output"), runs.run_json(state.run_id))


def check(meta: dict, old: Any, new: Any, committed: set[str]) -> Changes:
    """The changes from `old` to `new`, when the run can follow them all; else
    `ConfigError` naming every key it cannot follow, and why."""
    diff = changes(old, new)
    run_id = meta["run_id"]
    refused = {k: why for k in diff if (why := _fixed(type(new), k, committed))}
    refused |= _plan_refusals(meta, old, new, {k: v for k, v in diff.items() if k not in refused})
    if refused:
        raise ConfigError(f"resume of run {run_id!r} refused: config keys changed that the run "
                          "cannot follow: " + "; ".join(
                              f"{k} {_shown(*diff[k])} ({why})" for k, why in sorted(refused.items()))
                          + "; use the config the run started with (alignflow status "
                          f"{run_id} shows it), or start a new run")
    return diff


def _shown(old: Any, new: Any) -> str:
    return f"{old!r} → {new!r}"


def _fixed(cls: type, key: str, committed: set[str]) -> str | None:
    """Why `key` cannot change in a running run, or None."""
    if key.rsplit(".", 1)[-1] in IDENTITY_LEAVES:
        return "what the run trains"
    for prefix, task in getattr(cls, "RESUME_FIXED", {}).items():
        if key.startswith(prefix) and any(k == task or k.startswith(task + "/")
                                          for k in committed):
            return f"task {task!r} used it and is committed"
    return None


def _plan_refusals(meta: dict, old: Any, new: Any, diff: Changes) -> dict[str, str]:
    """The keys whose change alone makes a plan the run's checkpoints cannot follow (all
    changed keys together when no single one does)."""
    recorded = meta.get("plan")
    if recorded is None or not diff or planning.plan_of(new) is None:
        return {}
    plan = codec.decode(recorded, runs.run_json(meta["run_id"]))
    why = _refusal(new, plan)
    if why is None:
        return {}
    found = {}
    for key, (_, value) in diff.items():
        single = _with(old, key, value)
        if single is not None and (reason := _refusal(single, plan)) is not None:
            found[key] = reason
    return found or dict.fromkeys(diff, why)


def _refusal(config: Any, recorded: Any) -> str | None:
    try:
        plan = planning.plan_of(config)  # a config that makes none has nothing to follow
        if plan is not None:
            plan.follow(recorded)
    except ConfigError as exc:
        return str(exc).split(": ", 1)[-1].split("; start a new run")[0]
    return None


def _with(config: Any, key: str, value: Any) -> Any:
    """`config` with the one key set (None when that alone is not a valid config)."""
    data = copy.deepcopy(to_dict(config))
    node = data
    *path, leaf = key.split(".")
    for part in path:
        node = node.setdefault(part, {})
    node[leaf] = value
    try:
        return from_dict(type(config), data)
    except (ConfigError, FlowError):
        return None
