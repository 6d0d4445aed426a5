"""`--eval_split` without `--eval_dataset` in the offline flows: that split of the training
data is the eval set, as OpenRLHF's `blending_datasets` made it (v0.5 to v0.6: `eval_data =
data[eval_split]` of each training source; 0.7 on reads only `--eval_dataset`, so the flag
alone silently evaluated nothing, here as there).

Only a split the user named counts (its origin is a flag, `--set` or the YAML file): the
flows' default `eval.split` starts no evaluation. A training source with one split (a
single file, an `alignflow:` set) has no other split to take, and is refused in one line
(OpenRLHF 0.6 then evaluated on 3% of the training rows themselves); a folder or hub set
that lacks the split is refused by the data check (`preflight.py`), listing the ones it has.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from alignflow.flows.config.build import Resolved

PREFIX = "alignflow:"


def _one_split(spec: str) -> str | None:
    """The part of `spec` that has a single split, if any."""
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part.startswith(PREFIX) or Path(part).expanduser().is_file():
            return part
    return None


def eval_from_training(resolved: Resolved) -> tuple[Resolved, list[str], list[str]]:
    """(the config with `eval.dataset` = the training data when only `eval.split` was
    named, notes, problems)."""
    cfg, origins = resolved.config, resolved.origins
    ev, data = getattr(cfg, "eval", None), getattr(cfg, "data", None)
    if ev is None or data is None or not hasattr(ev, "ratio") or ev.dataset or ev.ratio > 0 or "eval.split" not in origins:
        return resolved, [], []
    named = origins["eval.split"]
    single = _one_split(data.dataset)
    if single is not None:
        return resolved, [], [
            f"eval.split = {ev.split!r} ({named}) without eval.dataset reads that split of "
            f"the training data, but {single!r} has one split only; give --eval_dataset, or "
            "hold out a share of it with --set eval.ratio=0.03"]
    config = dataclasses.replace(cfg, eval=dataclasses.replace(ev, dataset=data.dataset))
    origin = f"the training data's split {ev.split!r} ({named} without --eval_dataset)"
    note = (f"eval.dataset = data.dataset ({data.dataset}): {named} without --eval_dataset "
            f"evaluates on that split of the training data, as OpenRLHF <= 0.6 did")
    return Resolved(config, {**origins, "eval.dataset": origin}), [note], []
