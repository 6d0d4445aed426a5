"""PPO-family learn steps. Reads: rollouts, scores, reference (+ values). Commits:
rollout_advantages, metrics and a checkpoint of the trained role.

`learn_actor` computes advantages (KL in reward or as loss, the named estimator), then runs
`max_epochs` passes of PPO-clip over the batch in seeded `train_batch_size` minibatches, one
optimizer step each. `learn_critic` fits the value model to the returns with a clipped loss.
"""

from __future__ import annotations

import functools
import time

import pyarrow as pa
import torch

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.schemas import METRICS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.advantages.kl_control import AdaptiveKLController, FixedKLController
from alignflow.tasks.advantages.normalize import RunningMoments
from alignflow.tasks.losses.aggregate import masked_mean
from alignflow.tasks.losses.policy import kl_loss, policy_loss, value_loss
from alignflow.tasks.rl import experience, ptx
from alignflow.tasks.rl.batching import chunks, padded_pairs, to_padded
from alignflow.tasks.rl.forward import response_logprobs
from alignflow.tasks.rl.learn_config import AlgoConfig, OptimConfig
from alignflow.tasks.rl.records import LearnOutput, LearnState, StepOutput


def _minibatches(n: int, size: int, generator: torch.Generator) -> list[list[int]]:
    order = torch.randperm(n, generator=generator).tolist()
    return [order[i : i + size] for i in range(0, n, size)]


def _actor_loss(exp, algo: AlgoConfig, kl_coef: float, packed: bool, pad_id: int,
                temperature: float, norm: dict[str, float]):
    """The loss of one micro-batch, normalised by the whole minibatch (`norm`: num_tokens,
    num_seqs, max_len), so accumulating micro-batches equals one big batch."""
    def loss_fn(model, batch):
        idx = batch["idx"]
        logp, ent = response_logprobs(model, [exp.prompts[i] for i in idx],
                                      [exp.responses[i] for i in idx], packed=packed,
                                      pad_id=pad_id, temperature=temperature, with_entropy=True)
        width = logp.shape[1]
        mask = exp.mask[idx, :width] * exp.kept[idx, None]
        loss, m = policy_loss(logp, exp.old_logp[idx, :width], exp.advantages[idx, :width], mask,
                              name="dual_clip" if algo.dual_clip else "ppo",
                              eps_low=algo.eps_clip, eps_high=algo.eps_clip_high,
                              dual_clip=algo.dual_clip or 3.0, agg=algo.loss_agg, **norm)
        if algo.kl.use_kl_loss and kl_coef > 0:
            loss = loss + kl_coef * kl_loss(logp, exp.ref_logp[idx, :width], mask,
                                            estimator=algo.kl.kl_estimator, agg=algo.loss_agg,
                                            **norm)
        loss = ptx.with_ptx(loss, model, batch, algo.ptx.ptx_coef, pad_id)
        if algo.entropy_coef:
            loss = loss - algo.entropy_coef * masked_mean(ent, mask)
        # the trainer sums micro-batch stats: weight each by its share of the minibatch
        share = float(mask.sum()) / norm["num_tokens"]
        stats = {k: float(v) * share for k, v in m.items()}
        return loss, stats | {"entropy": float(masked_mean(ent, mask)) * share}
    return loss_fn


def _train(trainer, n: int, batch_size: int, micro: int, epochs: int, make_loss,
           generator: torch.Generator, step_extra=None) -> dict[str, float]:
    """`epochs` passes of seeded minibatches; one optimizer step per minibatch.
    `step_extra(global_step)` adds keys to each step's first micro-batch (the ptx texts)."""
    sums: dict[str, float] = {}
    steps = 0
    for _ in range(epochs):
        for mb in _minibatches(n, batch_size, generator):
            micro_batches = [{"idx": [mb[i] for i in r]} for r in chunks(len(mb), micro)]
            if step_extra is not None:
                micro_batches[0] |= step_extra(trainer.global_step)
            loss_fn = make_loss(mb)
            stats = trainer.step(micro_batches, loss_fn, weights=[1.0] * len(micro_batches))
            for k, v in stats.items():
                sums[k] = sums.get(k, 0.0) + float(v)
            steps += 1
    return {k: v / max(steps, 1) for k, v in sums.items()} | {"optimizer_steps": float(steps)}


def _ptx_texts(texts: list[list[int]], batch_size: int, step: int) -> dict:
    return {"ptx": ptx.ptx_batch(texts, step, batch_size)}


def _kl_controller(algo: AlgoConfig, state: LearnState | None):
    beta = state.kl_coef if state else algo.kl.init_kl_coef
    if algo.kl.kl_target is None:
        return FixedKLController(beta)
    return AdaptiveKLController(beta, algo.kl.kl_target, algo.kl.kl_horizon)


def learn_actor(host, rollouts: StepOutput, scores: StepOutput, reference: StepOutput,
                values: StepOutput | None, iteration: int, algo: AlgoConfig, optim: OptimConfig,
                n_samples: int, temperature: float, state: LearnState | None,
                max_len: int | None = None) -> LearnOutput:
    """Advantages, then PPO-clip updates of the policy (skipped while the actor is frozen)."""
    scope = current_scope()
    start = time.perf_counter()
    exp = experience.load_experience(scope.store, rollouts, scores, reference, values)
    controller = _kl_controller(algo, state)
    moments = (RunningMoments.from_state(state.reward_moments)
               if algo.normalize_reward and state and state.reward_moments
               else RunningMoments() if algo.normalize_reward else None)
    metrics = experience.compute(exp, algo, n_samples, controller.value, moments, max_len)
    adv_ref = scope.write("rollout_advantages", experience.advantages_table(exp, scope.task_key),
                          partition={"iter": iteration})
    if iteration >= algo.freeze_actor_steps:
        gen = torch.Generator().manual_seed(scope.seed)
        pad = host.tokenizer.pad_token_id
        kept = exp.mask * exp.kept[:, None]

        def make_loss(mb):
            norm = {"num_tokens": float(kept[mb].sum().clamp(min=1)),
                    "num_seqs": max(int(exp.kept[mb].sum()), 1), "max_len": max_len}
            return _actor_loss(exp, algo, controller.value, optim.packing_samples, pad,
                               temperature, norm)

        step_extra = (functools.partial(_ptx_texts, host.pretrain_ids(algo.ptx),
                                        algo.ptx.batch_size) if algo.ptx.enabled else None)
        metrics |= _train(host.actor, len(exp.responses), optim.train_batch_size,
                          optim.micro_train_batch_size, algo.max_epochs, make_loss, gen,
                          step_extra)
        host.policy_version += 1
    controller.update(metrics["kl"], len(exp.responses))
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}", "actor")
    metrics["learn_seconds"] = time.perf_counter() - start
    _write_metrics(scope, iteration, metrics)
    next_state = LearnState(controller.value, moments.state() if moments else {})
    return LearnOutput(folder, host.policy_version, metrics, next_state, (adv_ref,))


def learn_critic(host, rollouts: StepOutput, values: StepOutput, iteration: int,
                 algo: AlgoConfig, optim: OptimConfig, actor: LearnOutput) -> LearnOutput:
    """Clipped value regression onto the returns the actor's learn step committed."""
    scope = current_scope()
    roll = read_table(scope.store, rollouts.refs, columns=["prompt_ids", "response_ids"])
    prompts, responses = roll.column("prompt_ids").to_pylist(), roll.column("response_ids").to_pylist()
    width = max(len(r) for r in responses)
    old = to_padded(read_table(scope.store, values.refs, columns=["values"])
                    .column("values").to_pylist(), width)
    ret = to_padded(read_table(scope.store, actor.advantages, columns=["returns"])
                    .column("returns").to_pylist(), width)
    mask = to_padded([[1.0] * len(r) for r in responses], width)
    pad = host.tokenizer.pad_token_id

    def make_loss(mb):
        tokens = float(mask[mb].sum().clamp(min=1))

        def loss_fn(model, batch):
            idx = batch["idx"]
            ids, attn, action = padded_pairs([prompts[i] for i in idx],
                                             [responses[i] for i in idx], pad)
            w = action.shape[1]
            v = model(ids, attn, w)
            loss = value_loss(v, old[idx, :w], ret[idx, :w], mask[idx, :w], clip=algo.value_clip,
                              num_tokens=tokens)
            return loss, {"value_loss": float(loss)}
        return loss_fn

    gen = torch.Generator().manual_seed(scope.seed)
    metrics = _train(host.critic, len(responses), optim.train_batch_size,
                     optim.micro_train_batch_size, algo.max_epochs, make_loss, gen)
    metrics = {f"critic/{k}": v for k, v in metrics.items()}
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}", "critic")
    _write_metrics(scope, iteration, metrics)
    return LearnOutput(folder, host.policy_version, metrics)


def _write_metrics(scope, step: int, metrics: dict[str, float]) -> None:
    now = time.time()
    keys = sorted(metrics)
    scope.write(METRICS, pa.table({
        "run_id": [scope.run_id] * len(keys), "task_key": [scope.task_key] * len(keys),
        "step": [step] * len(keys), "key": keys, "value": [float(metrics[k]) for k in keys],
        "ts": [now] * len(keys)}), partition={"iter": step})
