"""One `save_steps` chunk of offline training. Reads: `offline_examples` (+ reference
log-probs, teacher logits). Commits: a checkpoint (the host's `save`), `metrics` (train
metrics every step, `eval/*` every `eval_steps`), and every consumed example with its loss
(`preferences` for pair objectives, `sft_samples` otherwise) keyed by run, step and task.
"""

from __future__ import annotations

import time

import pyarrow as pa
import torch
from safetensors.torch import load as load_tensors

from alignflow.artifacts.errors import FlowError
from alignflow.artifacts.schemas import METRICS, PREFERENCES, SFT_SAMPLES
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.offline.batches import step_indices
from alignflow.tasks.offline.config import PAIR_KINDS, Plan, TrainSpec
from alignflow.tasks.offline.objectives import OBJECTIVES, Context, step_denominator
from alignflow.tasks.offline.prepare import single_token
from alignflow.tasks.offline.records import (
    OfflineData,
    ReferenceOutput,
    TeacherOutput,
    TrainOutput,
)
from alignflow.tasks.offline.reference import load_reference


def make_context(host, spec: TrainSpec, examples: dict, reference: dict | None,
                 teacher: dict | None = None) -> Context:
    tok = host.tokenizer
    ctx = Context(examples, tok.pad_token_id, spec, reference, teacher or {})
    if spec.kind == "prm":
        ctx.placeholder_id = single_token(tok, spec.placeholder_token, "placeholder_token")
        if spec.reward_tokens:
            ctx.reward_token_ids = [single_token(tok, t, "reward_tokens")
                                    for t in spec.reward_tokens]
    return ctx


def _micro(idx: list[int], size: int) -> list[dict]:
    return [{"idx": idx[i : i + size]} for i in range(0, len(idx), size)]


def run_step(trainer, kind: str, ctx: Context, idx: list[int], micro: int):
    """One optimizer step over `idx`; returns (trainer stats, per-example values)."""
    objective, denom = OBJECTIVES[kind], step_denominator(kind, ctx, idx)
    per: dict[str, list] = {}

    def loss_fn(model, batch):
        out = objective(model, batch["idx"], ctx, denom)
        for key, values in out.per_example.items():
            per.setdefault(key, []).extend(values)
        return out.loss, out.metrics
    batches = _micro(idx, micro)
    stats = trainer.step(batches, loss_fn, weights=[1.0] * len(batches))
    return stats, per


@torch.no_grad()
def evaluate(model, kind: str, ctx: Context, micro: int) -> dict[str, float]:
    """Mean loss (and accuracy etc.) over the whole eval split."""
    kind = "sft" if kind == "distill" else kind  # no teacher logits for eval: report CE
    idx = list(range(len(ctx.examples["position"])))
    objective, denom = OBJECTIVES[kind], step_denominator(kind, ctx, idx)
    was_training = model.training
    model.eval()
    totals: dict[str, float] = {}
    for batch in _micro(idx, micro):
        out = objective(model, batch["idx"], ctx, denom)
        for key, value in {"loss": float(out.loss), **out.metrics}.items():
            totals[key] = totals.get(key, 0.0) + value
    model.train(was_training)
    return {f"eval/{k}": v for k, v in totals.items()}


def _example_rows(kind: str, ex: dict, idx: list[int], per: dict, step: int) -> list[dict]:
    if kind in PAIR_KINDS:
        return [{"pair_id": ex["example_id"][i], "prompt": ex["prompt"][i],
                 "chosen": ex["response"][i], "rejected": ex["rejected"][i],
                 "chosen_score": per["chosen_score"][j],
                 "rejected_score": per["rejected_score"][j],
                 "margin": per["chosen_score"][j] - per["rejected_score"][j],
                 "loss": per["loss"][j], "split": "train", "step": step}
                for j, i in enumerate(idx)]
    n_tokens = per.get("n_tokens") or [len(ex["input_ids"][i]) for i in idx]
    return [{"sample_id": ex["example_id"][i], "prompt": ex["prompt"][i],
             "response": ex["response"][i], "n_tokens": n_tokens[j], "loss": per["loss"][j],
             "truncated": ex["truncated"][i], "step": step} for j, i in enumerate(idx)]


def _metric_rows(step: int, values: dict[str, float]) -> list[dict]:
    now = time.time()
    return [{"step": step, "key": k, "value": float(v), "ts": now} for k, v in values.items()]


def _teacher(store, teacher: TeacherOutput | None) -> dict[int, torch.Tensor]:
    if teacher is None:
        return {}
    tensors = load_tensors(store.read_bytes(teacher.path))
    return {int(k[1:]): v for k, v in tensors.items()}


def train(host, data: OfflineData, reference: ReferenceOutput | None,
          teacher: TeacherOutput | None, chunk: int, plan: Plan, spec: TrainSpec) -> TrainOutput:
    """Optimizer steps `plan.chunk_steps(chunk)`, then a checkpoint of the host."""
    scope = current_scope()
    trainer, steps = host.trainer, plan.chunk_steps(chunk)
    if trainer.global_step != steps.start:
        raise FlowError(f"train chunk {chunk}: the host is at step {trainer.global_step}, "
                        f"expected {steps.start} (was it restored from the right checkpoint?)")
    examples = host.examples(scope.store, data)
    refs = load_reference(scope.store, reference) if reference else {}
    ctx = make_context(host, spec, examples["train"], refs.get("train"),
                       _teacher(scope.store, teacher))
    rows, metrics, sums = [], [], {}
    for step in steps:
        idx = step_indices(plan, step, spec.train_batch_size)
        stats, per = run_step(trainer, spec.kind, ctx, idx, spec.micro_train_batch_size)
        rows += _example_rows(spec.kind, ctx.examples, idx, per, step + 1)
        metrics += _metric_rows(step + 1, {f"train/{k}": v for k, v in stats.items()})
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + v
        if "eval" in examples and _eval_due(spec, step + 1, plan.total_steps):
            eval_ctx = make_context(host, spec, examples["eval"], refs.get("eval"))
            metrics += _metric_rows(step + 1, evaluate(trainer.model, spec.kind, eval_ctx,
                                                       spec.micro_train_batch_size))
    table = PREFERENCES if spec.kind in PAIR_KINDS else SFT_SAMPLES
    scope.write(table, pa.Table.from_pylist(rows))
    scope.write(METRICS, pa.Table.from_pylist(metrics))
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}")
    means = {k: v / len(steps) for k, v in sums.items() if k != "step"}
    return TrainOutput(folder, trainer.global_step, means)


def _eval_due(spec: TrainSpec, step: int, total: int) -> bool:
    return step == total or (spec.eval_steps > 0 and step % spec.eval_steps == 0)
