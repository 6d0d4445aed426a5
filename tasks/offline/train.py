"""One `save_steps` chunk of training on prepared examples — the one training step of the
offline flows and of the durable loops. Reads: `offline_examples` (+ reference log-probs,
teacher logits). Commits: a checkpoint (the host's `save`), `metrics` (`train/*` every
step, `eval/*` every `eval_steps`), and every consumed example with its loss (`preferences`
for pair objectives, `sft_samples` otherwise) keyed by run, step and task.

On a data-parallel host each rank trains on its equal share of every step's examples,
normalised by the whole step's denominator (the trainer sums gradients over ranks); step
statistics and per-example values are gathered, so rank 0 commits what one worker would.
"""

from __future__ import annotations

import pyarrow as pa
import torch
from safetensors.torch import load as load_tensors

from alignflow.artifacts.scope import beat, current_scope
from alignflow.errors import FlowError
from alignflow.tasks.distributed import reduce, sharding
from alignflow.tasks.offline.batches import host_examples
from alignflow.tasks.offline.config import TrainSpec
from alignflow.tasks.offline.kinds import Objective, objective
from alignflow.tasks.offline.objectives import Context, step_denominator
from alignflow.tasks.offline.records import OfflineData, ReferenceOutput, TeacherOutput, TrainOutput
from alignflow.tasks.offline.reference import load_reference
from alignflow.tasks.offline.rows import single_token
from alignflow.tasks.steps.host_api import Trained
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.trainers.plan import Plan, micro_batches


def make_context(host: Trained, spec: TrainSpec, examples: dict, reference: dict | None,
                 teacher: dict | None = None) -> Context:
    tok = host.tokenizer
    ctx = Context(examples, tok.pad_token_id, spec, reference, teacher or {})
    if objective(spec.kind).step_tokens:
        ctx.placeholder_id = single_token(tok, spec.placeholder_token, "placeholder_token")
        if spec.reward_tokens:
            ctx.reward_token_ids = [single_token(tok, t, "reward_tokens")
                                    for t in spec.reward_tokens]
    return ctx


def run_step(trainer, obj: Objective, ctx: Context, idx: list[int], micro: int,
             loss_normalizer: str = "step"):
    """One optimizer step over `idx` (this rank's share of it); returns (trainer stats,
    per-example values in `idx` order), both over all ranks. A token-level loss is divided
    by the step's tokens, or (`micro_batch`, OpenRLHF <= v0.10.2) by each micro-batch's
    own, the micro-batch weighing its share of the step's examples."""
    own = loss_normalizer == "micro_batch" and obj.token_level
    denom = step_denominator(obj.token_level, ctx, idx)
    per: dict[str, list] = {}

    def loss_fn(model, batch):
        mine = step_denominator(True, ctx, batch["idx"]) if own else denom
        out = obj.loss(model, batch["idx"], ctx, mine)
        for key, values in out.per_example.items():
            per.setdefault(key, []).extend(values)
        return out.loss, out.metrics
    rank, world = reduce.rank_and_size()
    batches = micro_batches(sharding.shard(idx, rank, world), micro)
    weights = [len(b["idx"]) / len(idx) if own else 1.0 for b in batches]
    stats = trainer.step(batches, loss_fn, weights=weights)
    return reduce.global_shares(stats), reduce.gather_lists(per)


@torch.no_grad()
def evaluate(model, obj: Objective, ctx: Context, micro: int) -> dict[str, float]:
    """Mean loss (and accuracy etc.) over the whole eval split."""
    loss = obj.eval_loss or obj.loss
    idx = list(range(len(ctx.examples["position"])))
    denom = step_denominator(obj.token_level, ctx, idx)
    was_training = model.training
    model.eval()
    totals: dict[str, float] = {}
    for batch in micro_batches(idx, micro):
        out = loss(model, batch["idx"], ctx, denom)
        for key, value in {"loss": float(out.loss), **out.metrics}.items():
            totals[key] = totals.get(key, 0.0) + value
    model.train(was_training)
    return totals


def _example_rows(obj: Objective, ex: dict, idx: list[int], per: dict, step: int) -> list[dict]:
    if obj.pairs:
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


def _teacher(store, teacher: TeacherOutput | None) -> dict[int, torch.Tensor]:
    if teacher is None:
        return {}
    tensors = load_tensors(store.read_bytes(teacher.path))
    return {int(k[1:]): v for k, v in tensors.items()}


def _check_position(trainer, plan: Plan, steps: range, chunk: int) -> None:
    if trainer.global_step != plan.first_step + steps.start:
        raise FlowError(f"train chunk {chunk}: the host is at step {trainer.global_step}, "
                        f"expected {plan.first_step + steps.start} (was it restored from the "
                        "right checkpoint?)")


def train(host: Trained, data: OfflineData, reference: ReferenceOutput | None,
          teacher: TeacherOutput | None, chunk: int, plan: Plan, spec: TrainSpec) -> TrainOutput:
    """Optimizer steps `plan.chunk_steps(chunk)`, then a checkpoint of the host."""
    scope, obj = current_scope(), objective(spec.kind)
    trainer, steps = host.trainer, plan.chunk_steps(chunk)
    _check_position(trainer, plan, steps, chunk)
    examples = host_examples(host, scope.store, data)
    refs = load_reference(scope.store, reference) if reference else {}
    ctx = make_context(host, spec, examples["train"], refs.get("train"),
                       _teacher(scope.store, teacher))
    rows, metrics, sums = [], [], {}
    for step in steps:
        idx = plan.indices(step, spec.train_batch_size)
        stats, per = run_step(trainer, obj, ctx, idx, spec.micro_train_batch_size,
                              spec.loss_normalizer)
        done = trainer.global_step
        beat(steps.index(step) + 1, len(steps), "optimizer steps")
        rows += _example_rows(obj, ctx.examples, idx, per, done)
        metrics.append((done, {f"train/{k}": v for k, v in stats.items() if k != "step"}))
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + v
        if "eval" in examples and _eval_due(spec, step + 1, plan.total_steps):
            eval_ctx = make_context(host, spec, examples["eval"], refs.get("eval"))
            scores = evaluate(trainer.model, obj, eval_ctx, spec.micro_train_batch_size)
            metrics.append((done, {f"eval/{k}": v for k, v in scores.items()}))
    _commit_rows(scope, obj, rows, metrics, data.round)
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}")
    means = {k: v / len(steps) for k, v in sums.items() if k != "step"}
    return TrainOutput(folder, trainer.global_step, means)


def _commit_rows(scope, obj: Objective, rows: list[dict], metrics: list, round_: int | None):
    """Consumed examples and step metrics; a loop's round is a column and a partition."""
    partition = None if round_ is None else {"iter": round_}
    table = pa.Table.from_pylist(rows)
    if round_ is not None and "round" in obj.table.arrow_schema.names:
        table = table.append_column("round", pa.array([round_] * len(rows), pa.int32()))
    scope.write(obj.table, table, partition=partition)
    write_metrics(scope, metrics, partition=partition)


def _eval_due(spec: TrainSpec, step: int, total: int) -> bool:
    return step == total or (spec.eval_steps > 0 and step % spec.eval_steps == 0)
