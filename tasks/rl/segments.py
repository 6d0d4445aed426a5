"""Partial rollouts: a batch generated in segments, each with the weights of its own task.
Reads: prompts, the batch's earlier segments. Commits: rollout_segments, and rollouts once
every response has finished.

A weight update that lands between two segments reaches the unfinished responses at
once: the next segment continues them — from their token ids, nothing re-tokenised — with
the new weights, instead of finishing them with the old ones or starting them again. Each
continuation re-reads its context under the new weights (no key/value cache is carried
across the update). `version_spans` of a response lists where each version's tokens start.
Limit: a stop string whose text straddles a segment boundary is not seen (EOS always is).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyarrow as pa

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import current_scope
from alignflow.errors import ConfigError
from alignflow.tasks.engines.base import GeneratedSample
from alignflow.tasks.rl.async_generate import batch_metrics
from alignflow.tasks.rl.async_records import PolicyRef, SegmentOutput
from alignflow.tasks.steps.generate import RolloutConfig, eos_ids, rollout_table
from alignflow.tasks.steps.host_api import Sampler
from alignflow.tasks.steps.prompts import prompt_batch
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import SEGMENTS


@dataclass
class Partial:
    """One response as far as the segments so far took it."""

    prompt_index: int
    sample_index: int
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    spans: list[dict[str, int]] = field(default_factory=list)
    finish: str | None = None


def _so_far(store, batch: pa.Table, n: int, previous: tuple[SegmentOutput, ...]) -> list[Partial]:
    """Every response of the batch, with the tokens of the earlier segments appended."""
    prompts = batch.column("prompt_ids").to_pylist()
    pids = batch.column("prompt_id").to_pylist()
    if len(set(pids)) != len(pids):
        raise ConfigError("async.partial_rollout: a batch repeats a prompt (rollout_batch_size "
                          f"{len(pids)} > the {len(set(pids))} prompts); use fewer per batch")
    rows = [Partial(i, s, list(p)) for i, p in enumerate(prompts) for s in range(n)]
    at = {(pids[r.prompt_index], r.sample_index): r for r in rows}
    for seg in previous:
        table = read_table(store, seg.refs).to_pylist()
        for rec in table:
            row = at[(rec["prompt_id"], rec["sample_idx"])]
            if rec["response_ids"]:
                row.spans.append({"start": len(row.response_ids), "version": seg.policy_version})
            row.response_ids += rec["response_ids"]
            row.logprobs += rec["behaviour_logprobs"]
            row.finish = rec["finish_reason"]
    return rows


def _extend(row: Partial, sample: GeneratedSample, version: int, max_len: int) -> None:
    if sample.response_ids:
        row.spans.append({"start": len(row.response_ids), "version": version})
    row.response_ids += sample.response_ids
    row.logprobs += sample.behaviour_logprobs
    if sample.finish_reason == "stop":
        row.finish = "stop"
    elif len(row.response_ids) >= max_len:
        row.finish = "length"


def _segment_table(scope, iteration: int, pids: list[str], rows: list[Partial],
                   before: list[int], segment: int, version: int) -> pa.Table:
    """The tokens this segment added to each response it continued."""
    n = len(rows)
    return pa.table({
        "run_id": [scope.run_id] * n, "iteration": [iteration] * n,
        "task_key": [scope.task_key] * n,
        "prompt_id": [pids[r.prompt_index] for r in rows],
        "sample_idx": [r.sample_index for r in rows],
        "segment": [segment] * n, "policy_version": [version] * n,
        "response_ids": [r.response_ids[b:] for r, b in zip(rows, before, strict=True)],
        "behaviour_logprobs": [r.logprobs[b:] for r, b in zip(rows, before, strict=True)],
        "finish_reason": [r.finish for r in rows],
    }, schema=SEGMENTS.arrow_schema)


def _assemble(scope, iteration: int, batch: pa.Table, rows: list[Partial], tok) -> pa.Table:
    """The finished batch as `rollouts` rows; `policy_version` is the oldest token's."""
    samples = [GeneratedSample(prompt_index=r.prompt_index, sample_index=r.sample_index,
                               prompt_ids=r.prompt_ids, response_ids=r.response_ids,
                               behaviour_logprobs=r.logprobs,
                               finish_reason="stop" if r.finish == "stop" else "length",
                               policy_version=r.spans[0]["version"] if r.spans else 0)
               for r in rows]
    table = rollout_table(scope, iteration, batch, samples, tok)
    return table.append_column("version_spans", pa.array(
        [r.spans for r in rows], ROLLOUTS.arrow_schema.field("version_spans").type))


def generate_segment(host: Sampler, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
                     policy: PolicyRef, previous: tuple[SegmentOutput, ...],
                     segment_tokens: int) -> SegmentOutput:
    """Continue every unfinished response of the batch by up to `segment_tokens` tokens,
    sampled with `policy`; the segment that finishes the last response commits the batch."""
    scope = current_scope()
    host.use_policy(scope.store, policy)
    batch = prompt_batch(scope.store, prompts, iteration, cfg.batch_size)
    rows = _so_far(scope.store, batch, cfg.n_samples_per_prompt, previous)
    active = [r for r in rows if r.finish is None]
    before = [len(r.response_ids) for r in active]
    new = min(segment_tokens, cfg.max_new_tokens - max(before, default=0))
    params = replace(cfg.sampling(scope.seed, eos_ids(host.tokenizer)), n=1, max_new_tokens=new)
    samples = host.engine.generate([r.prompt_ids + r.response_ids for r in active], params)
    for row, sample in zip(active, samples, strict=True):
        _extend(row, sample, policy.version, cfg.max_new_tokens)
    pids = batch.column("prompt_id").to_pylist()
    ref = scope.write(SEGMENTS, _segment_table(scope, iteration, pids, active, before,
                                               len(previous), policy.version),
                      partition={"iter": iteration})
    unfinished = sum(r.finish is None for r in rows)
    out = SegmentOutput((ref,), len(previous), policy.version, unfinished)
    if unfinished:
        return out
    table = _assemble(scope, iteration, batch, rows, host.tokenizer)
    done = scope.write(ROLLOUTS, table, partition={"iter": iteration})
    mixed = sum(len(r.spans) > 1 for r in rows) / len(rows)
    metrics = batch_metrics(table) | {"segments": float(len(previous) + 1), "mixed_frac": mixed}
    return replace(out, rollouts=StepOutput((done,), table.num_rows, metrics))
