"""`alignflow campaign start|tick|status|pause|resume|stop`.

`start CONFIG` drives the campaign in the foreground (durable sleep between rounds; kill it
and start it again: it continues where it stopped). `tick CONFIG` runs the round that is
due, if any, and exits — for cron, a Kubernetes CronJob, Airflow or Prefect; ticks that
find no due round, or a driver at work, return at once. The CONFIG named on the command
line is the user's input; the copy stored with the campaign is only compared with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError, FlowError, LeaseHeld
from alignflow.flows.campaign import control
from alignflow.flows.campaign.config import CampaignConfig, campaign_run_id
from alignflow.flows.campaign.records import Inputs
from alignflow.flows.campaign.rounds import PROGRESS, check_round_flow, initial_policy, round_config
from alignflow.flows.config import load_config
from alignflow.flows.config.refs import references
from alignflow.flows.control import api, reconfigure
from alignflow.flows.journal import runs
from alignflow.flows.loader import canonical_ref, load_flow
from alignflow.flows.trust.config import decode_config

ACTIONS = ("start", "tick", "status", "pause", "resume", "stop")


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="what to do")
    parser.add_argument("target", nargs="?", metavar="CONFIG|NAME",
                        help="the campaign's YAML config (start, tick) or its name")
    parser.add_argument("--set", dest="sets", metavar="KEY=VALUE", action="append", default=[],
                        help="override one dotted key of CONFIG (repeatable)")
    parser.add_argument("--store", help="store URL (default $ALIGNFLOW_STORE or ./alignflow-store)")
    parser.add_argument("--address", help="Ray address for the round runs (default: in-process)")
    parser.add_argument("--seed", type=int, default=0, help="campaign seed (default 0)")
    parser.add_argument("--trust", metavar="ITEM", action="append", default=[],
                        help="start, tick: confirm a code file (accepted even if changed), a "
                             "directory, a URL or a Ray address the campaign names, besides "
                             "what CONFIG names (repeatable)")
    parser.add_argument("--dry-run", action="store_true",
                        help="start, tick: check CONFIG (round flow and config, gate, schedule) "
                             "and say what the campaign would run; run nothing")


def load_campaign(path: str, sets: list[str]) -> CampaignConfig:
    """The config file, with relative paths (input folder, flow file) made absolute from
    the file's folder, so cron can run it from anywhere."""
    cfg = load_config(CampaignConfig, config_file=path, sets=sets)
    base = Path(path).resolve().parent

    def absolute(p: str) -> str:
        return p if "://" in p or os.path.isabs(p) else str((base / p).resolve())
    flow = cfg.flow
    if ".py:" in flow:
        file, _, attr = flow.rpartition(":")
        flow = f"{absolute(file)}:{attr}"
    source = cfg.inputs.source and absolute(cfg.inputs.source)
    return dataclasses.replace(cfg, flow=flow,
                               inputs=dataclasses.replace(cfg.inputs, source=source))


def _named(cfg: CampaignConfig) -> list[str]:
    """What the user's CONFIG names (the round flow, and the code, servers and folders of
    the round config and the gate): confirmed for this command's runs, being local input.
    The round flow is loaded here (named by the user) to read its config's references."""
    load_flow(canonical_ref(cfg.flow), named=True)
    round_cfg = round_config(cfg, initial_policy(cfg), Inputs())
    found = references(round_cfg, "config.") if dataclasses.is_dataclass(round_cfg) else []
    return [r.value for r in [*found, *references(cfg)]]


def _drive(cfg: CampaignConfig, args: argparse.Namespace, *, block: bool) -> int:
    from alignflow.flows.cli.progress import Progress

    store = api.open_store(args.store)
    named = [*_named(cfg), *args.trust]
    check_round_flow(cfg)
    again = f"alignflow campaign tick {args.target}"  # or start again: both continue it
    token = PROGRESS.set(lambda: Progress(stream=sys.stderr, live=False))
    try:
        if not store.exists(runs.run_json(cfg.run_id)):
            api.run("campaign", cfg, run_id=cfg.run_id, store=store, seed=args.seed,
                    executor="inline", address=args.address, block=block, trust=named,
                    progress=Progress(stream=sys.stderr, resume=again))
        elif (why := _idle_reason(store, meta := runs.read_run(store, cfg.run_id), block)):
            _check_changes(store, meta, cfg)
            print(f"campaign {cfg.name}: {why}")
            return 0
        else:  # CONFIG is followed where the campaign can (`flows/control/reconfigure.py`)
            api.resume(cfg.run_id, store=store, block=block, trust=named, config=cfg,
                       address=args.address, progress=Progress(stream=sys.stderr, resume=again))
    except LeaseHeld as exc:
        print(f"campaign {cfg.name}: a driver is at work on it ({exc}); nothing to do")
        return 0
    finally:
        PROGRESS.reset(token)
    print_status(store, cfg.run_id)
    return 0


def _dry_run(cfg: CampaignConfig) -> int:
    """What `start`/`tick` would drive, once CONFIG passed every check they make first."""
    _named(cfg)
    check_round_flow(cfg)
    s, g = cfg.schedule, cfg.gate
    when = f"every {s.every}" if s.every else f"cron {s.cron!r} ({s.timezone})"
    print(f"campaign {cfg.name} (run {cfg.run_id}): rounds of flow {cfg.flow} {when}, from "
          f"{initial_policy(cfg)}; inputs {cfg.inputs.source or '(none)'} "
          f"{cfg.inputs.pattern!r} -> {cfg.inputs.key}; gate {g.metric} ({g.mode}) on "
          f"{g.prompts}; keep {cfg.retention.keep_rounds} rounds")
    return 0


def _check_changes(store: Store, meta: dict, cfg: CampaignConfig) -> None:
    """An idle tick checks CONFIG against the campaign's now (a change it cannot follow is
    refused at once); the next driver records what it follows."""
    committed = set(runs.read_manifests(store, cfg.run_id))
    diff = reconfigure.check(meta, decode_config(meta, CampaignConfig), cfg, committed)
    if diff:
        print(f"note: campaign {cfg.name} follows the config given now from its next round: "
              f"{', '.join(diff)}", file=sys.stderr)


def _idle_reason(store: Store, meta: dict, block: bool) -> str | None:
    """Why this driver has nothing to do now (None: go on)."""
    status = runs.effective_status(store, meta)
    if status == runs.CANCELED:
        raise FlowError(f"campaign run {meta['run_id']!r} was stopped; start a campaign under "
                        "a new name (or `alignflow delete` this one first)")
    if status == runs.SUCCESSFUL:
        return "finished (max_rounds reached)"
    wake = meta.get("wake_at")
    if not block and status == runs.SLEEPING and wake is not None and wake > time.time():
        return f"next round due at {_when(wake)}; nothing to do"
    return None


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(t)) if t else "-"


def print_status(store: Store, run_id: str) -> None:
    """Current policy, last round with its gate result, next round's wake time."""
    meta = api.get_metadata(run_id, store=store)
    done = control.records(store, run_id)
    paused = " (paused)" if control.is_paused(store, run_id) else ""
    print(f"{run_id}: {meta['status']}{paused}  rounds recorded: {len(done)}")
    promoted = [r for r in done if r.get("promoted")]
    if promoted:
        p = promoted[-1]
        print(f"  policy v{p['policy_out_version']}: {p['policy_out']} "
              f"({p['metric']} {p['candidate_score']:.4g}, round {p['round']})")
    else:
        print("  policy v0: the initial policy")
    if done:
        last = done[-1]
        gate = ""
        if last.get("candidate_score") is not None:
            gate = (f", {last['metric']} {last['candidate_score']:.4g} vs "
                    f"{last['incumbent_score']:.4g}")
        print(f"  last round {last['round']} due {_when(last['due'])}: {last['status']}{gate}"
              f"{'  run ' + last['round_run'] if last.get('round_run') else ''}")
    wake = control.next_due(store, run_id)
    if wake is not None and meta["status"] not in (runs.CANCELED, runs.SUCCESSFUL):
        print(f"  next round due {_when(wake)}")
    if meta.get("error"):
        print(f"  error: {meta['error']}")


def _name(target: str | None, sets: list[str]) -> str:
    if target is None:
        raise ConfigError("campaign: give the campaign's CONFIG file or its name")
    if target.endswith((".yaml", ".yml")) and os.path.isfile(target):
        return load_campaign(target, sets).run_id
    return target if target.startswith("campaign-") else campaign_run_id(target)


def _list(store: Store) -> int:
    found = [m for m in api.list_runs(store) if m.get("flow") == "campaign"]
    for m in found:
        print_status(store, m["run_id"])
    if not found:
        print(f"no campaigns in {store.url}")
    return 0


def run(name: str, args: argparse.Namespace) -> int:
    if args.action in ("start", "tick"):
        if args.target is None:
            raise ConfigError(f"campaign {args.action}: give the campaign's CONFIG file")
        cfg = load_campaign(args.target, args.sets)
        if args.dry_run:
            return _dry_run(cfg)
        if args.action == "start":
            from alignflow.flows.cli.commands import _sigterm_as_interrupt

            _sigterm_as_interrupt()
        return _drive(cfg, args, block=args.action == "start")
    store = api.open_store(args.store)
    if args.action == "status" and args.target is None:
        return _list(store)
    run_id = _name(args.target, args.sets)
    if args.action == "status":
        print_status(store, run_id)
    elif args.action in ("pause", "resume"):
        control.set_paused(store, run_id, args.action == "pause")
        print(f"{run_id}: {'paused: due rounds are skipped' if args.action == 'pause' else 'resumed'}")
    else:
        print("canceled: " + ", ".join(control.stop(store, run_id)))
    return 0
