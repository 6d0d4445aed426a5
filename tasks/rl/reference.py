"""Reference logprobs and critic values. Reads: rollouts. Commits: rollout_reference /
rollout_values.

Both run on padded micro-batches (`rollout.micro_batch_size` samples, or with dynamic
batching as many as fit `rollout.max_tokens_per_gpu` tokens): on CPU a packed row's
block-diagonal mask still costs attention over the whole row (no varlen kernels), so
packing many sequences is slower.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import torch

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.modeling.batching import inference_chunks, padded_pairs
from alignflow.tasks.modeling.forward import response_logprobs
from alignflow.tasks.steps import gpu_memory
from alignflow.tasks.steps.host_api import RLHost
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import REFERENCE, VALUES

KEY = ["run_id", "iteration", "prompt_id", "sample_idx"]


def _read(scope, rollouts: StepOutput) -> pa.Table:
    return read_table(scope.store, rollouts.refs, columns=[*KEY, "prompt_ids", "response_ids"])


def _keyed(table: pa.Table, scope, column: str, values: list[list[float]]) -> pa.Table:
    return pa.table({
        **{k: table.column(k) for k in ("run_id", "iteration")},
        "task_key": [scope.task_key] * table.num_rows,
        **{k: table.column(k) for k in ("prompt_id", "sample_idx")},
        column: pa.array(values, pa.list_(pa.float32())),
    })


def _inputs(rollouts: StepOutput) -> tuple[Any, pa.Table, list, list]:
    """The task's scope, the rollouts' table, its prompt and response token ids."""
    scope = current_scope()
    table = _read(scope, rollouts)
    return (scope, table, table.column("prompt_ids").to_pylist(),
            table.column("response_ids").to_pylist())


@torch.no_grad()

def token_logprobs(model, prompts: list[list[int]], responses: list[list[int]], *, pad_id: int,
                   micro_batch: int, temperature: float, max_tokens: int | None
                   ) -> list[list[float]]:
    """log π(response token) of every response token under a frozen `model`, in
    micro-batches (`inference_chunks`): the reference's, a teacher's."""
    out: list[list[float]] = [[] for _ in prompts]
    for idx in inference_chunks(prompts, responses, micro_batch, max_tokens):
        lp, _ = response_logprobs(model, [prompts[i] for i in idx],
                                  [responses[i] for i in idx], packed=False, pad_id=pad_id,
                                  temperature=temperature)
        for j, i in enumerate(idx):
            out[i] = lp[j, : len(responses[i])].tolist()
    return out

def reference(host: RLHost, rollouts: StepOutput, iteration: int, micro_batch: int = 8,
              temperature: float = 1.0, max_tokens: int | None = None) -> StepOutput:
    """log π_ref(response token) for every response token, at the sampling temperature."""
    scope, table, prompts, responses = _inputs(rollouts)
    pad = host.tokenizer.pad_token_id
    gpu_memory.start(host)
    with host.reference_model() as model:
        out = token_logprobs(model, prompts, responses, pad_id=pad, micro_batch=micro_batch,
                             temperature=temperature, max_tokens=max_tokens)
    host.idle("ref")
    ref = scope.write(REFERENCE, _keyed(table, scope, "ref_logprobs", out),
                      partition={"iter": iteration})
    return StepOutput((ref,), table.num_rows, gpu_memory.record(scope, host, "ref", iteration))


@torch.no_grad()
def values(host: RLHost, rollouts: StepOutput, iteration: int, micro_batch: int = 8,
           max_tokens: int | None = None) -> StepOutput:
    """V(s_t) before every response token, from the critic."""
    scope, table, prompts, responses = _inputs(rollouts)
    pad, out = host.tokenizer.pad_token_id, [[] for _ in prompts]
    critic = host.critic.model
    gpu_memory.start(host)
    for idx in inference_chunks(prompts, responses, micro_batch, max_tokens):
        ids, mask, action = padded_pairs([prompts[i] for i in idx], [responses[i] for i in idx],
                                         pad)
        v = critic(ids, mask, action.shape[1])
        for j, i in enumerate(idx):
            out[i] = v[j, : int(action[j].sum())].tolist()
    ref = scope.write(VALUES, _keyed(table, scope, "values", out), partition={"iter": iteration})
    return StepOutput((ref,), table.num_rows,
                      gpu_memory.record(scope, host, "critic", iteration))
