"""The critic's learn step (PPO with GAE). Reads: rollouts, the critic's values, the returns
the actor's learn step committed. Commits: metrics and a checkpoint of the critic.

A clipped value regression onto the returns, in the actor's minibatches and micro-batches
(`minibatch.py`: fixed or token-budget micro-batches, the step's or each micro-batch's
token mean).
"""

from __future__ import annotations

import pyarrow as pa
import torch

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.losses.aggregate import Normaliser
from alignflow.tasks.losses.policy import value_loss
from alignflow.tasks.modeling.batching import padded_pairs, to_padded
from alignflow.tasks.modeling.device import model_device
from alignflow.tasks.rl import minibatch
from alignflow.tasks.rl.finite import check_finite
from alignflow.tasks.rl.learn_config import LearnSettings
from alignflow.tasks.steps import gpu_memory
from alignflow.tasks.steps.host_api import RLHost
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.records import LearnOutput, StepOutput


def _value_loss(prompts, responses, old, ret, mask, pad: int, clip: float, norm_of,
                iteration: int):
    def loss_fn(model, batch):
        idx = batch["idx"]
        ids, attn, action = padded_pairs([prompts[i] for i in idx],
                                         [responses[i] for i in idx], pad)
        w = action.shape[1]
        v = model(ids, attn, w)
        loss = value_loss(v, old[idx, :w], ret[idx, :w], mask[idx, :w], clip=clip,
                          norm=Normaliser(num_tokens=norm_of(idx).num_tokens))
        check_finite(loss, iteration=iteration, what="value", samples=[int(i) for i in idx],
                     parts={"values": v, "old values": old[idx, :w], "returns": ret[idx, :w]},
                     mask=mask[idx, :w])
        return loss, {"value_loss": float(loss.detach())}
    return loss_fn


KEY = ["prompt_id", "sample_idx"]


def _rows_learned(keys: pa.Table, learned: pa.Table) -> list[int]:
    """Rows of the rollouts the actor learned from, in its order (all of them, but for a
    refilled batch: `flows/rl/refill.py`)."""
    def pairs(table: pa.Table) -> list[tuple]:
        return list(zip(*(table.column(c).to_pylist() for c in KEY), strict=True))
    position = {k: i for i, k in enumerate(pairs(keys))}
    return [position[k] for k in pairs(learned)]


def learn_critic(host: RLHost, rollouts: StepOutput, values: StepOutput, iteration: int,
                 settings: LearnSettings, actor: LearnOutput) -> LearnOutput:
    """Clipped value regression onto the returns the actor's learn step committed."""
    scope = current_scope()
    host.wake("critic")
    gpu_memory.start(host)
    learned = read_table(scope.store, actor.advantages, columns=[*KEY, "returns"])
    rows = _rows_learned(read_table(scope.store, rollouts.refs, columns=KEY), learned)
    roll = read_table(scope.store, rollouts.refs, columns=["prompt_ids", "response_ids"])
    prompts = [roll.column("prompt_ids")[i].as_py() for i in rows]
    responses = [roll.column("response_ids")[i].as_py() for i in rows]
    width = max(len(r) for r in responses)
    stored = read_table(scope.store, values.refs, columns=["values"]).column("values")
    old = to_padded([stored[i].as_py() for i in rows], width)
    ret = to_padded(learned.column("returns").to_pylist(), width)
    mask = to_padded([[1.0] * len(r) for r in responses], width)
    device = model_device(host.critic.model)
    old, ret, mask = old.to(device), ret.to(device), mask.to(device)
    pad, clip = host.tokenizer.pad_token_id, settings.critic.value_clip
    counts = minibatch.Counts.of(mask, torch.ones(len(responses)),
                                 [len(p) + len(r) for p, r in zip(prompts, responses, strict=True)],
                                 settings.train.loss_normalizer)

    def make_loss(mb):
        return _value_loss(prompts, responses, old, ret, mask, pad, clip,
                           lambda idx: counts.norm(mb, idx), iteration)

    metrics = minibatch.train_steps(host.critic, minibatch.plan(scope.seed, len(responses),
                                                                settings),
                                    settings, counts, make_loss)
    metrics = {f"critic/{k}": v for k, v in metrics.items()}
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}", "critic")
    metrics |= gpu_memory.peak_metrics(host, "critic")
    host.idle("critic")
    write_metrics(scope, [(iteration, metrics)], partition={"iter": iteration})
    return LearnOutput(folder, host.policy_version, metrics)
