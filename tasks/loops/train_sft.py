"""Rejection sampling's fine-tuning chunk. Reads: rollouts, rollout_selection. Commits: a
checkpoint of the policy, sft_samples (every sample consumed, with its step and loss) and
per-step metrics.

Loss: token-mean cross-entropy of the kept responses (prompt tokens are context only),
normalised by the minibatch's response tokens so micro-batches add up to one big batch.
"""

from __future__ import annotations

import pyarrow as pa
import torch

from alignflow.artifacts.schemas import SFT_SAMPLES
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.loops.plan import (
    LoopTrainConfig,
    chunk_minibatches,
    mean_metrics,
    micro_batches,
    selected_rows,
    write_step_metrics,
)
from alignflow.tasks.loops.records import Selection
from alignflow.tasks.rl.forward import response_logprobs
from alignflow.tasks.rl.records import LearnOutput, StepOutput


def _sft_loss_fn(prompts, responses, pad_id: int, num_tokens: float, losses: dict[int, float]):
    def loss_fn(model, batch):
        idx = batch["idx"]
        logp, _ = response_logprobs(model, [prompts[i] for i in idx],
                                    [responses[i] for i in idx], packed=False, pad_id=pad_id)
        lengths = torch.tensor([len(responses[i]) for i in idx], dtype=torch.float32)
        nll = -logp.sum(-1)
        for i, v in zip(idx, (nll.detach() / lengths).tolist(), strict=True):
            losses[i] = v
        return nll.sum() / num_tokens, {}
    return loss_fn


def sft_chunk(host, rollouts: StepOutput, selection: Selection, round_: int, chunk: int,
              cfg: LoopTrainConfig) -> LearnOutput:
    """Optimizer steps of chunk `chunk` of round `round_` on the round's best samples."""
    scope = current_scope()
    rows = selected_rows(scope.store, rollouts, selection, "best")
    prompts, responses = rows.column("prompt_ids").to_pylist(), rows.column("response_ids").to_pylist()
    pad = host.tokenizer.pad_token_id
    history, consumed = [], []
    for mb in chunk_minibatches(rows.num_rows, cfg, selection.seed, chunk):
        losses: dict[int, float] = {}
        tokens = float(max(sum(len(responses[i]) for i in mb), 1))
        micro = micro_batches(mb, cfg.micro_train_batch_size)
        stats = host.actor.step(micro, _sft_loss_fn(prompts, responses, pad, tokens, losses),
                                weights=[1.0] * len(micro))
        history.append(stats)
        consumed += [(int(stats["step"]), i, losses[i]) for i in mb]
    _write_samples(scope, rows, consumed)
    write_step_metrics(scope, round_, history)
    host.policy_version = round_ + 1
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}", "actor")
    return LearnOutput(folder, host.policy_version, mean_metrics(history))


def _write_samples(scope, rows: pa.Table, consumed: list[tuple[int, int, float]]) -> None:
    pids, sidx = rows.column("prompt_id").to_pylist(), rows.column("sample_idx").to_pylist()
    text_p, text_r = rows.column("prompt").to_pylist(), rows.column("response").to_pylist()
    lengths = [len(r) for r in rows.column("response_ids").to_pylist()]
    round_prefix = scope.task_key.split("/")[0]
    scope.write(SFT_SAMPLES, pa.table({
        "run_id": [scope.run_id] * len(consumed),
        "step": pa.array([s for s, _, _ in consumed], pa.int32()),
        "task_key": [scope.task_key] * len(consumed),
        "sample_id": [f"{round_prefix}/{pids[i]}/{sidx[i]}" for _, i, _ in consumed],
        "prompt": [text_p[i] for _, i, _ in consumed],
        "response": [text_r[i] for _, i, _ in consumed],
        "n_tokens": pa.array([lengths[i] for _, i, _ in consumed], pa.int32()),
        "loss": pa.array([v for *_, v in consumed], pa.float32()),
        "truncated": [False] * len(consumed)}))
