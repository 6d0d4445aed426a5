"""Sample responses with the current policy. Reads: prompts. Commits: rollouts."""

from __future__ import annotations

import dataclasses

import pyarrow as pa

from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.engines.base import GeneratedSample
from alignflow.tasks.steps import gpu_memory, host_engine, rollout_engine
from alignflow.tasks.steps.host_api import Generator
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.prompts import prompt_batch
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.rollout_config import METRICS, RolloutConfig, budgets


def eos_ids(tok) -> tuple[int, ...]:
    """The tokenizer's EOS and `<|im_end|>`, whichever exist."""
    ids = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
    return tuple(sorted(i for i in ids if isinstance(i, int) and i >= 0 and i != tok.unk_token_id))


def cut_to_budget(sample: GeneratedSample, budget: int) -> GeneratedSample:
    """A sample generated under a larger shared limit, cut to its own budget. Exact: each
    sample draws from its own seeded generator, so its first tokens do not depend on the
    limit."""
    if len(sample.response_ids) <= budget:
        return sample
    return dataclasses.replace(sample, response_ids=sample.response_ids[:budget],
                               behaviour_logprobs=sample.behaviour_logprobs[:budget],
                               finish_reason="length")


def generate(host: Generator, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
             round_: int | None = None, max_len: int | None = None,
             start: int | None = None, quiet: bool = False) -> StepOutput:
    """One iteration's rollouts: `n_samples_per_prompt` responses for each batch prompt.
    Loops (rejection sampling, iterative DPO) pass their `round_`, stored with each row;
    `max_len` (data.max_len) sizes each prompt's budget when max_new_tokens is null;
    `start`: the first prompt drawn (default: the iteration's share); `quiet`: a refill
    round after the first writes no metrics of the iteration."""
    if not rollout_engine.drives(host):  # rank 0 of the host generates for all of it
        rollout_engine.follow(host)
        return StepOutput((), 0, {})
    scope = current_scope()
    batch = prompt_batch(scope.store, prompts, iteration, cfg.batch_size, start)
    tok = host.tokenizer
    gpu_memory.start(host)
    prompt_ids = batch.column("prompt_ids").to_pylist()
    limits = budgets(prompt_ids, cfg, max_len)
    lo, hi = host_engine.shard(host, len(prompt_ids))  # all, or this rank's (per-rank engines)
    samples = rollout_engine.generate(host, prompt_ids[lo:hi], cfg.sampling(
        scope.seed, eos_ids(tok), max(limits)), prompt_offset=lo)
    samples = host_engine.gathered(host, samples)  # rank 0: every rank's, in order
    host.engine_idle()
    if samples is None:
        return StepOutput((), 0, {})
    samples = [cut_to_budget(s, limits[s.prompt_index]) for s in samples]
    table = rollout_table(scope, iteration, batch, samples, tok)
    if round_ is not None:
        table = table.append_column("round", pa.array([round_] * table.num_rows, pa.int32()))
    ref = scope.write(ROLLOUTS, table, partition={"iter": iteration})
    lengths = table.column("response_len").to_pylist()
    values = (sum(lengths) / len(lengths),
              sum(s.finish_reason == "length" for s in samples) / len(samples),
              float(sum(lengths)))
    metrics = dict(zip(METRICS, values, strict=True)) | gpu_memory.peak_metrics(host, "actor")
    if not quiet:
        write_metrics(scope, [(iteration, metrics)], partition={"iter": iteration})
    return StepOutput((ref,), table.num_rows, metrics)


def rollout_table(scope, iteration: int, batch: pa.Table, samples: list[GeneratedSample],
                  tok) -> pa.Table:
    """The `rollouts` rows of `samples` (one per response), keyed to their prompts."""
    pids = batch.column("prompt_id").to_pylist()
    texts = batch.column("prompt").to_pylist()
    labels = batch.column("label").to_pylist()
    n = len(samples)
    return pa.table({
        "run_id": [scope.run_id] * n,
        "iteration": [iteration] * n,
        "task_key": [scope.task_key] * n,
        "prompt_id": [pids[s.prompt_index] for s in samples],
        "sample_idx": [s.sample_index for s in samples],
        "prompt": [texts[s.prompt_index] for s in samples],
        "response": tok.batch_decode([s.response_ids for s in samples], skip_special_tokens=True),
        "prompt_ids": [s.prompt_ids for s in samples],
        "response_ids": [s.response_ids for s in samples],
        "behaviour_logprobs": [s.behaviour_logprobs for s in samples],
        "prompt_len": [len(s.prompt_ids) for s in samples],
        "response_len": [len(s.response_ids) for s in samples],
        "finish_reason": [s.finish_reason for s in samples],
        "policy_version": [s.policy_version for s in samples],
        "label": [labels[s.prompt_index] for s in samples],
    })
