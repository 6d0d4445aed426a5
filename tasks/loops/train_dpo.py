"""Iterative DPO's steps after pairing: the round reference and the training chunks.

`pair_reference` (reads rollouts, rollout_selection; commits pair_reference) scores every
pair once with the policy as it stands at the start of the round — the round's reference —
so no second model is held and no reference forward runs during training. `dpo_chunk`
(commits a checkpoint, `preferences` rows of the consumed pairs with step and loss, and
per-step metrics) runs the DPO loss against those cached log-probs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import torch

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.schemas import PREFERENCES
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
from alignflow.tasks.loops.tables import PAIR_REFERENCE
from alignflow.tasks.losses.preference import DPOVariant, dpo_loss
from alignflow.tasks.rl.batching import chunks
from alignflow.tasks.rl.forward import response_logprobs
from alignflow.tasks.rl.records import LearnOutput, StepOutput


@dataclass(frozen=True, kw_only=True)
class DPOLossConfig:
    """The DPO loss: beta, variant (sigmoid / ipo / cdpo) and cDPO's label smoothing."""

    beta: float = 0.1
    variant: DPOVariant = "sigmoid"
    label_smoothing: float = 0.0


@dataclass(frozen=True)
class _Pairs:
    prompts: list[list[int]]
    chosen: list[list[int]]
    rejected: list[list[int]]
    pair_ids: list[str]


def _load_pairs(store, rollouts: StepOutput, selection: Selection) -> _Pairs:
    c = selected_rows(store, rollouts, selection, "chosen")
    r = selected_rows(store, rollouts, selection, "rejected")
    assert c.column("pair_id").to_pylist() == r.column("pair_id").to_pylist()
    return _Pairs(c.column("prompt_ids").to_pylist(), c.column("response_ids").to_pylist(),
                  r.column("response_ids").to_pylist(), c.column("pair_id").to_pylist())


def _sequence_logps(model, pairs: _Pairs, idx: list[int], pad_id: int):
    """Summed response log-probs of chosen (B,) and rejected (B,), in one forward."""
    prompts = [pairs.prompts[i] for i in idx] * 2
    responses = [pairs.chosen[i] for i in idx] + [pairs.rejected[i] for i in idx]
    logp, _ = response_logprobs(model, prompts, responses, packed=False, pad_id=pad_id)
    sums = logp.sum(-1)
    return sums[: len(idx)], sums[len(idx) :]


def pair_reference(host, rollouts: StepOutput, selection: Selection, round_: int,
                   micro_batch: int = 8) -> StepOutput:
    """Reference log-probs of each pair under the policy at the start of the round."""
    scope = current_scope()
    pairs = _load_pairs(scope.store, rollouts, selection)
    model, pad = host.actor.model, host.tokenizer.pad_token_id
    was_training = model.training
    model.eval()
    ref_c, ref_r = [], []
    with torch.no_grad():
        for r in chunks(len(pairs.pair_ids), micro_batch):
            c, rj = _sequence_logps(model, pairs, list(r), pad)
            ref_c += c.tolist()
            ref_r += rj.tolist()
    model.train(was_training)
    n = len(pairs.pair_ids)
    ref = scope.write(PAIR_REFERENCE, pa.table({
        "run_id": [scope.run_id] * n, "round": pa.array([round_] * n, pa.int32()),
        "task_key": [scope.task_key] * n, "pair_id": pairs.pair_ids,
        "ref_chosen": pa.array(ref_c, pa.float32()), "ref_rejected": pa.array(ref_r, pa.float32())}),
        partition={"iter": round_})
    return StepOutput((ref,), n, {"ref_margin_mean": (sum(ref_c) - sum(ref_r)) / max(n, 1)})


def _dpo_loss_fn(pairs: _Pairs, ref: torch.Tensor, loss_cfg: DPOLossConfig, pad_id: int,
                 batch_pairs: int, losses: dict[int, float]):
    def loss_fn(model, batch):
        idx = batch["idx"]
        pi_c, pi_r = _sequence_logps(model, pairs, idx, pad_id)
        out = dpo_loss(pi_c, pi_r, ref[idx, 0], ref[idx, 1], variant=loss_cfg.variant,
                       beta=loss_cfg.beta, label_smoothing=loss_cfg.label_smoothing)
        for i, v in zip(idx, out.loss.detach().tolist(), strict=True):
            losses[i] = v
        share = len(idx) / batch_pairs
        acc = float((out.chosen_reward > out.rejected_reward).float().mean())
        margin = float((out.chosen_reward - out.rejected_reward).mean())
        return out.loss.sum() / batch_pairs, {"reward_accuracy": acc * share,
                                              "reward_margin": margin * share}
    return loss_fn


def dpo_chunk(host, rollouts: StepOutput, selection: Selection, reference: StepOutput,
              round_: int, chunk: int, cfg: LoopTrainConfig, loss_cfg: DPOLossConfig) -> LearnOutput:
    """Optimizer steps of chunk `chunk` of round `round_` on the round's pairs."""
    scope = current_scope()
    pairs = _load_pairs(scope.store, rollouts, selection)
    refs = read_table(scope.store, reference.refs, columns=["ref_chosen", "ref_rejected"])
    ref = torch.tensor([refs.column("ref_chosen").to_pylist(),
                        refs.column("ref_rejected").to_pylist()], dtype=torch.float32).T
    pad = host.tokenizer.pad_token_id
    history, consumed = [], []
    for mb in chunk_minibatches(len(pairs.pair_ids), cfg, selection.seed, chunk):
        losses: dict[int, float] = {}
        micro = micro_batches(mb, cfg.micro_train_batch_size)
        stats = host.actor.step(micro, _dpo_loss_fn(pairs, ref, loss_cfg, pad, len(mb), losses),
                                weights=[1.0] * len(micro))
        history.append(stats)
        consumed += [(int(stats["step"]), i, losses[i]) for i in mb]
    n = len(consumed)
    scope.write(PREFERENCES, pa.table({
        "run_id": [scope.run_id] * n, "round": pa.array([round_] * n, pa.int32()),
        "step": pa.array([s for s, _, _ in consumed], pa.int32()),
        "task_key": [scope.task_key] * n, "pair_id": [pairs.pair_ids[i] for _, i, _ in consumed],
        "loss": pa.array([v for *_, v in consumed], pa.float32()), "split": ["train"] * n}),
        partition={"iter": round_})
    write_step_metrics(scope, round_, history)
    host.policy_version = round_ + 1
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}", "actor")
    return LearnOutput(folder, host.policy_version, mean_metrics(history))
