"""The models and data a run reads from elsewhere, pinned by their content.

When a run starts, the driver identifies every source its config names (`s3://` URLs, Hub
ids: `artifacts/sources/`), fetching each once into this node's cache, and records its key,
URL (credentials masked) and content hash in run.json (`sources`). The hashes travel to
every worker with the run's allowances (`usercode.Allowances.sources`): a node whose fetch
gives other bytes refuses to load them (a Hub id's workers load the pinned commit, however
its branch moved). On resume every source is identified again (no download while its
listing is the recorded one); one whose bytes changed is refused, one line each naming the
key, the URL and both hashes, unless this command names it again (`--trust URL`, or the
run's command given again: a Hub id then follows its branch), which records the new hash.

Reading a model or data set from a URL the store names is a fetch, not a send: it needs no
say-so of its own (the identity check already holds a resume to the sources it started
with, `config.py`), and its URL is stored masked like every config value.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from alignflow.artifacts.redact import redact
from alignflow.artifacts.sources import identify, is_url, model_source
from alignflow.artifacts.sources.fetch import changed, pin_value
from alignflow.artifacts.sources.kinds import normal
from alignflow.artifacts.usercode import Allowances
from alignflow.flows.trust.check import untrusted
from alignflow.flows.trust.config import identity

DATA_LEAVES = frozenset({"prompt_dataset", "dataset", "pretrain_data"})
REWARD_LEAVES = frozenset({"sources", "rewards"})  # reward specs: a model among rules, URLs
_NAMED = re.compile(r"^([A-Za-z_][\w.-]*)=(.+)$")  # a reward spec's `name=` (tasks/rewards)


def _items(leaf: str, value: Any) -> list[str]:
    """The source candidates of one identity leaf: a data key's comma list, a reward
    list's models (without `name=`), a model key's value."""
    values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    if leaf in DATA_LEAVES:
        return [s.strip() for v in values for s in v.split(",") if s.strip()]
    if leaf in REWARD_LEAVES:
        targets = [m.group(2) if (m := _NAMED.match(v)) else v for v in values]
        return [t for t in targets if not t.endswith(".py")]
    return values


def _is_source(leaf: str, item: str) -> bool:
    if leaf in DATA_LEAVES:
        return is_url(item)  # a Hub data set loads through `datasets`' own cache
    return leaf in REWARD_LEAVES | {"model_name_or_path"} and model_source(item) is not None


def source_specs(config: Any) -> list[tuple[str, str]]:
    """(key, source) of every model and data set `config` reads from a URL or the Hub; a
    key holding several gets `[i]` after it."""
    found = []
    for key, value in identity(config).items():
        leaf = key.rsplit(".", 1)[-1]
        items = _items(leaf, value)
        for i, item in enumerate(items):
            if _is_source(leaf, item):
                found.append((key if len(items) == 1 else f"{key}[{i}]", normal(item)))
    return found


@dataclass(frozen=True)
class Pins:
    """What a run reads from elsewhere: run.json's `sources` record, the allowances that
    carry the hashes to its workers, and what to tell the user."""

    record: dict[str, dict] = field(default_factory=dict)
    allowed: Allowances = field(default_factory=Allowances)
    notes: tuple[str, ...] = ()


def pin(config: Any, recorded: dict | None = None, named: Iterable[str] = (),
        run_id: str = "") -> Pins:
    """Identify every source of `config`; against `recorded` (a resume), refuse those whose
    bytes changed unless `named` names them (`Untrusted`, one line each)."""
    record, hashes, notes, refusals = {}, {}, [], []
    given = {normal(n) for n in named}
    for key, spec in source_specs(config):
        before = (recorded or {}).get(key)
        before = before if isinstance(before, dict) else None
        if spec not in hashes:  # named again: as the source is now (a Hub id: its branch)
            hashes[spec] = identify(spec, None if spec in given else before)
        sha, fingerprint = hashes[spec]
        old = before.get("sha256") if before else None
        if old and old != sha:
            if spec not in given:
                refusals.append(str(changed(spec, str(old), sha, key)))
                continue
            notes.append(f"{key}: source {redact(spec)!r} changed since the run recorded it "
                         f"(sha256 {str(old)[:16]}… → {sha[:16]}…); named again, the run "
                         "reads the new bytes from now on")
        record[key] = {"url": redact(spec), "sha256": sha, "fingerprint": fingerprint}
    if refusals:
        raise untrusted(run_id, refusals)
    allowed = Allowances(sources={s: pin_value(s, h, f) for s, (h, f) in hashes.items()})
    return Pins(record, allowed, tuple(notes))


def pin_resume(meta: dict, config: Any, named: Iterable[str],
               given_config: bool) -> tuple[Allowances, dict]:
    """A resume's pins: the recorded hashes, checked now (`pin`); sources named on this
    command line — or by the run's command given again — may have changed. Returns the
    allowances and the run.json fields to record (`sources`, when a record changed)."""
    named = set(named) | ({s for _, s in source_specs(config)} if given_config else set())
    pins = pin(config, meta.get("sources"), named, str(meta.get("run_id")))
    for note in pins.notes:
        print(f"note: run {meta.get('run_id')}: {note}", file=sys.stderr)
    changed = bool(pins.record) and pins.record != meta.get("sources")
    return pins.allowed, ({"sources": pins.record} if changed else {})
