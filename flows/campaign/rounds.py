"""One campaign round = one run of the round flow, whose parent run is the campaign.

Its id is the campaign's run id plus the round's due time, so a driver that died mid-round
finds the run again and resumes it where it stopped (its committed tasks replay); a round
run that already finished is only read. The round config is the campaign's `config`
mapping with the current policy at `policy_key` and the round's new files at `inputs.key`.
"""

from __future__ import annotations

import contextvars
import operator
import time
from collections.abc import Callable
from typing import Any

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError, FlowError
from alignflow.flows.campaign.config import CampaignConfig, lookup
from alignflow.flows.campaign.inputs import local_paths
from alignflow.flows.campaign.records import Inputs, RoundRun
from alignflow.flows.config import from_dict
from alignflow.flows.config.sources import Keys, flatten
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.loader import canonical_ref, load_flow

# Set by the CLI: makes the progress display of a round run (None: no display).
PROGRESS: contextvars.ContextVar[Callable[[], Any] | None] = contextvars.ContextVar(
    "alignflow_round_progress", default=None)


def round_run_id(campaign_run: str, due: float) -> str:
    """`<campaign run>-<due time, UTC>`: the round's identity is its scheduled time."""
    return f"{campaign_run}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(due))}"


def round_config(cfg: CampaignConfig, policy_path: str, inputs: Inputs) -> Any:
    """The round flow's config: the campaign's mapping + this round's policy and files."""
    data = dict(cfg.config)
    data[cfg.policy_key] = policy_path
    if inputs.files:
        data[cfg.inputs.key] = ",".join(local_paths(inputs.files))
    _flow, cls = load_flow(canonical_ref(cfg.flow))
    if cls is None:
        return _nested(data)
    return from_dict(cls, data)


def _nested(data: dict) -> dict:
    """Dotted keys of a plain-dict config as nested mappings ({"a.b": 1} → {"a": {"b": 1}})."""
    out: dict = {}
    for key, value in data.items():
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def run_round(cfg: CampaignConfig, run_id: str, config: Any, *, store: Store, seed: int,
              parent: str, address: str | None) -> RoundRun:
    """Start round run `run_id`, or resume it where a killed driver left it."""
    make_progress = PROGRESS.get()
    progress = make_progress() if make_progress else None
    if not store.exists(runs.run_json(run_id)):
        out = api.run(canonical_ref(cfg.flow), config, run_id=run_id, store=store, seed=seed,
                      executor=cfg.executor, address=address, parent_run=parent,
                      progress=progress)
    elif api.get_status(run_id, store=store) == runs.SUCCESSFUL:
        out = api.get_output(run_id, store=store)
    else:
        # force: only the holder of the campaign's lease drives its round runs, so a live
        # lease on the round is a killed driver's (possibly on another machine or pod); the
        # round run is held to what the campaign's command confirmed (`flows/trust/`)
        out = api.resume(run_id, store=store, force=True, address=address, progress=progress)
    model = out.get("model") if isinstance(out, dict) else None
    if not isinstance(model, str):
        raise FlowError(f"round run {run_id!r} of flow {cfg.flow!r} returned no 'model' (the "
                        "store path of its exported policy); a campaign's round flow must "
                        "return {'model': ...} as the built-in flows do")
    return RoundRun(run_id, model)


def initial_policy(cfg: CampaignConfig) -> str:
    """The policy round 0 starts from: the round config's value at `policy_key` (a flag
    name like `pretrain` or a dotted key; the flow's default when the config has none)."""
    _flow, cls = load_flow(canonical_ref(cfg.flow))
    if cls is None:
        value = lookup(cfg.config, cfg.policy_key)
    else:
        (key, *more) = Keys.of(cls).canonical(cfg.policy_key)
        value = operator.attrgetter(key)(from_dict(cls, cfg.config)) if not more else None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"policy_key={cfg.policy_key!r}: the round config names no starting "
                          f"policy there (flow {cfg.flow!r}); expected a model name or folder")
    return value


def check_round_flow(cfg: CampaignConfig) -> None:
    """Fail at start, not at the first due time: the flow loads, its config builds."""
    try:
        round_config(cfg, initial_policy(cfg), Inputs())
    except FlowError as exc:
        raise ConfigError(f"campaign {cfg.name!r}: flow {cfg.flow!r}: {exc}") from None
    if cfg.inputs.source and cfg.inputs.min_files == 0 and not _names_data(cfg):
        raise ConfigError(
            f"inputs.min_files: 0 trains a round with no new file on the round config's own "
            f"data, but config names none at {cfg.inputs.key!r} (inputs.key): it would train "
            f"on flow {cfg.flow!r}'s default data; set config.{cfg.inputs.key}, or "
            "inputs.min_files >= 1 to skip such rounds")


def _names_data(cfg: CampaignConfig) -> bool:
    """Whether the campaign's round config sets the key its input files go to."""
    _flow, cls = load_flow(canonical_ref(cfg.flow))
    if cls is None:
        return lookup(cfg.config, cfg.inputs.key) is not None
    keys, over = Keys.of(cls), dict[str, tuple[Any, str]]()  # `sources.Overrides`
    flatten(keys, cfg.config, "campaign config", over)
    return any(k in over for k in keys.canonical(cfg.inputs.key))
