"""Admitting a stored run to this machine: its flow, its config and everything they name,
confirmed by this machine's say-so (`sayso.py`, `check.py`) into what this process may run.

A resume calls `admit` once, with the run's state read under its lease; it returns what the
drive needs and what run.json should record from now on (the code hashes the user fixed,
the sources' pins), for the run's life to write in one update. Nothing here writes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from alignflow.artifacts import redact, usercode
from alignflow.artifacts.store import Store
from alignflow.flows.config.build import with_sets
from alignflow.flows.config.refs import Reference, references
from alignflow.flows.engine import Flow
from alignflow.flows.journal.runs import RunState
from alignflow.flows.seams import FlowConfig
from alignflow.flows.trust import signing
from alignflow.flows.trust.check import Context, confirm, record_of, recorded_hashes, untrusted
from alignflow.flows.trust.config import check_identity, decode_config, restore_masked
from alignflow.flows.trust.flow import stored_flow
from alignflow.flows.trust.sayso import Sayso, active, local_sayso
from alignflow.flows.trust.sources import pin_resume, sources_of


@dataclass(frozen=True)
class Given:
    """What the command resuming a run names itself: the flow (named again), the config
    (the run's command given again), `--trust` items, `--trust-store`, `--address`, and
    `--set KEY=VALUE` items (the user's fix, applied on the config: `reconfigure.py` says
    which keys the run can follow)."""

    flow: Flow | str | None = None
    config: FlowConfig = None
    trust: tuple[str, ...] = ()
    trust_store: bool = False
    address: str | None = None
    sets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Admitted:
    """A stored run as this process may drive it."""

    flow: Flow
    stored: Any  # the config the run has so far
    config: FlowConfig  # the config it is driven with (the stored one, or the one given now)
    allowed: usercode.Allowances
    sayso: Sayso
    record: dict = field(default_factory=dict)  # run.json fields to write when the drive starts


def context(store: Store, run_id: str, recorded: dict[str, str],
            unsigned: str | None = "a new run") -> Context:
    """The check's context: the run, the code hashes to take on its word, a local store's
    real root, and why its records do not verify (None: they do, `signing.py`)."""
    root = store.path("") if getattr(store, "protocol", None) in ("file", "local") else None
    return Context(run_id, recorded, os.path.realpath(root) if root else None,
                   vouched=unsigned is None, unsigned=unsigned)


def _stored_context(state: RunState, sayso: Sayso) -> Context:
    """A stored run's context: its records taken on their word only when they verify with
    this machine's key, or the user owns the store (`--trust-store`)."""
    unsigned = signing.verdict(state.meta)
    taken = unsigned is None or sayso.store
    return context(state.store, state.run_id, recorded_hashes(state.meta) if taken else {},
                   unsigned)


def admit(state: RunState, given: Given) -> Admitted:
    """The stored run's flow and config, and what they name, confirmed or refused (all at
    once, one line each: `Untrusted`); a changed code file the user named is recorded."""
    meta, names = state.meta, [given.flow.rpartition(":")[0]] if isinstance(given.flow, str) else []
    sayso = active() or local_sayso(given.trust, store_url=state.store.url,
                                    address=given.address, trust_store=given.trust_store,
                                    named=names)
    ctx = _stored_context(state, sayso)
    flow, cls, flow_code = stored_flow(meta, given.flow, sayso, ctx)
    stored = decode_config(restore_masked(meta, sayso.named), cls)
    redact.mask_referenced(meta.get("config"))
    if ctx.vouched or sayso.store:  # else the identity is the store's word: each source and
        check_identity(meta, stored)  # reference is confirmed on its own below
    config, sayso = _config_now(stored, given, sayso)
    refs = references(config)  # the flow itself was checked as it loaded
    allowed, refusals = confirm(refs, sayso, ctx)
    pinned, sources, unpinned = pin_resume(meta, config, [*given.trust, *sayso.named],
                                           given.config is not None, ctx.vouched or sayso.store)
    if refusals or unpinned:  # every refusal at once, one line each
        raise untrusted(state.run_id, refusals + unpinned, ctx.unsigned)
    allowed |= flow_code | pinned
    record = sources | _code_record(meta, refs, allowed)
    return Admitted(flow, stored, config, allowed, sayso, record)


def _config_now(stored: Any, given: Given, sayso: Sayso) -> tuple[Any, Sayso]:
    """The config the resume drives (the stored one, the command's given again, with its
    `--set` items), and the say-so with what those items name: typed on this command line,
    a code file, server, folder or source a `--set` brings in is the user's own."""
    config = stored if given.config is None else given.config
    if not given.sets:
        return config, sayso
    before = config
    config = with_sets(config, given.sets)
    old = {r.value for r in references(before)} | {s for _, s, _ in sources_of(before)}
    new = [r.value for r in references(config)] + [s for _, s, _ in sources_of(config)]
    return config, sayso.with_named(v for v in new if v not in old)


def _code_record(meta: dict, refs: Iterable[Reference], allowed: usercode.Allowances) -> dict:
    """A changed file the user named is the user's fix: its hash is recorded from now on."""
    code = dict(meta.get("code") or {})
    now = record_of(refs)
    if now != code.get("refs") and all(r["sha256"] == allowed.files.get(r["path"], r["sha256"])
                                       for r in now):
        return {"code": dict(code, refs=now)}
    return {}
