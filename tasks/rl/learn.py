"""PPO-family learn steps. Reads: rollouts, scores, reference (+ values). Commits:
rollout_advantages, metrics and a checkpoint of the trained role.

`learn_actor` takes π_old from the trainer's own forward pass (`correction.py`), computes
advantages (the KL penalty in the reward or as a loss term, the named estimator), then runs
`max_epochs` passes of the named policy loss (`actor.policy_loss_type`) over the batch in
seeded `train_batch_size` minibatches, one optimizer step each (`minibatch.py`: micro-batches
and normalisers). `learn_critic` (`learn_critic.py`) fits the value model to the returns.

On a data-parallel host every rank loads the whole batch and computes the same advantages
(so their normalisation is global by construction); each rank trains on its equal share of
every minibatch, with the loss normalised by the whole minibatch's counts, and the trainer
sums gradients over ranks: N workers step exactly as one would on the whole minibatch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from alignflow.artifacts.scope import current_scope
from alignflow.errors import ConfigError
from alignflow.tasks.advantages.normalize import RunningMoments
from alignflow.tasks.distributed import reduce
from alignflow.tasks.losses.aggregate import Normaliser, aggregate, masked_mean
from alignflow.tasks.losses.is_correction import is_weights
from alignflow.tasks.losses.policy import policy_loss
from alignflow.tasks.modeling.device import model_device
from alignflow.tasks.modeling.forward import response_logprobs
from alignflow.tasks.rl import experience, minibatch, mismatch, ptx
from alignflow.tasks.rl.consumption import consumption_table, staleness_metrics
from alignflow.tasks.rl.correction import engine_is_trainer, proximal_logprobs
from alignflow.tasks.rl.experience import Advantages, Experience, behaviour
from alignflow.tasks.rl.finite import check_finite
from alignflow.tasks.rl.kl_penalty import KLPenalty
from alignflow.tasks.rl.learn_config import LearnSettings
from alignflow.tasks.steps import gpu_memory
from alignflow.tasks.steps.host_api import RLHost
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.records import LearnOutput, LearnState, StepOutput


def _surrogate(logp, exp: Experience, idx, adv, mask, settings: LearnSettings, norm):
    """The named policy loss against π_old (`exp.old_logp`: the trainer's own log-probs,
    `correction.py`); with IS correction on, each token weighted by its gated ratio π_old / μ
    to the behaviour log-probs. GSPO with IS correction takes its sequence ratio against μ
    instead, with no IS weight (OpenRLHF 0.11.2's `PolicyLoss`)."""
    algo, actor, width = settings.algo, settings.actor, logp.shape[1]
    eps_low, eps_high = actor.clip_bounds
    name = actor.policy_loss_type
    name = "dual_clip" if name == "ppo" and actor.dual_clip else name
    common = dict(name=name, eps_low=eps_low, eps_high=eps_high,
                  dual_clip=actor.dual_clip, agg=algo.loss_agg, norm=norm,
                  knobs=actor.policy_loss)
    old, mu = exp.old_logp[idx, :width], behaviour(exp)[idx, :width]
    corr = algo.advantage
    if not corr.is_correction_enable:
        return policy_loss(logp, old, adv, mask, **common)
    if name == "gspo":
        return policy_loss(logp, mu, adv, mask, **common)
    low, high = corr.is_correction_threshold
    weights, is_metrics = is_weights(old, mu, mask, kind=corr.is_correction_type, low=low,
                                     high=high, gating=corr.is_correction_gating)
    loss, metrics = policy_loss(logp, old, adv, mask, weights=weights, **common)
    return loss, metrics | is_metrics


def _actor_loss(exp: Experience, adv: Advantages, settings: LearnSettings, penalty: KLPenalty,
                pad_id: int, norm_of: Callable[[list[int]], Normaliser], iteration: int):
    """The loss of one micro-batch, divided by what `norm_of(idx)` says (num_tokens,
    num_seqs, max_len: the step's, or the micro-batch's own; `minibatch.py`). A
    non-finite loss stops the step before its backward (`finite.py`)."""
    algo, actor = settings.algo, settings.actor
    world = reduce.rank_and_size()[1]

    def loss_fn(model, batch):
        idx = batch["idx"]
        norm = norm_of(idx)
        logp, ent = response_logprobs(model, [exp.prompts[i] for i in idx],
                                      [exp.responses[i] for i in idx],
                                      packed=settings.packing, pad_id=pad_id,
                                      temperature=settings.temperature, with_entropy=True)
        width = logp.shape[1]
        mask = exp.mask[idx, :width] * adv.kept[idx, None]
        loss, m = _surrogate(logp, exp, idx, adv.advantages[idx, :width], mask, settings, norm)
        kl_term = None if exp.ref_logp is None else penalty.loss(
            logp, exp.ref_logp[idx, :width], mask, algo.loss_agg, norm)
        parts = {"policy loss": loss, "kl loss": 0.0 if kl_term is None else kl_term,
                 "log-probs": logp, "old log-probs": exp.old_logp[idx, :width],
                 "advantages": adv.advantages[idx, :width]}
        loss = loss if kl_term is None else loss + kl_term
        # every rank adds the step's ptx batch; gradients are summed over the ranks
        loss = ptx.with_ptx(loss, model, batch,
                            algo.ptx.ptx_coef / world * batch.get("ptx_scale", 1.0), pad_id)
        if actor.entropy_coef:  # OpenRLHF: a token mean over the step, whatever the policy's
            loss = loss - actor.entropy_coef * aggregate(ent, mask, "token-mean", norm)
        check_finite(loss, iteration=iteration, what="policy", samples=[int(i) for i in idx],
                     parts=parts, mask=mask)
        # the trainer sums micro-batch stats: weight each by its share of the minibatch
        share = float(mask.sum()) / norm.num_tokens
        stats = {k: float(v) * share for k, v in m.items()}
        return loss, stats | {"entropy": float(masked_mean(ent, mask)) * share}
    return loss_fn


def _refilled(exp: Experience, settings: LearnSettings):
    """A refilled batch cut to its first `keep_groups` passing groups (else as it is)."""
    if settings.keep_groups is None:
        return exp, {}
    low, high = settings.algo.dynamic_filtering_range
    return experience.first_groups(exp, settings.n_samples, settings.keep_groups, low, high)


def _moments(settings: LearnSettings, state: LearnState | None) -> RunningMoments | None:
    if not settings.reward.normalize_running:
        return None
    if state and state.reward_moments:
        return RunningMoments.from_state(state.reward_moments)
    return RunningMoments()


def _pi_old(host: RLHost, exp: Experience, settings: LearnSettings):
    """π_old: the trainer's log-probs of the batch under its weights before this step, one
    forward pass (also the trainer side of the vLLM mismatch metrics); None where the
    engine's behaviour log-probs are those same numbers (`correction.engine_is_trainer`)."""
    model = host.actor.model
    param = next(model.parameters())
    if not settings.algo.advantage.is_correction_enable and engine_is_trainer(
            host.sampled_by, param.device, param.dtype, exp.versions, host.policy_version):
        return None
    return proximal_logprobs(model, exp.prompts, exp.responses,
                             micro_batch=settings.train.micro_batch_size,
                             max_tokens=settings.rollout_max_tokens, packed=settings.packing,
                             pad_id=host.tokenizer.pad_token_id,
                             temperature=settings.temperature)


def _update_policy(host: RLHost, exp: Experience, adv: Advantages, settings: LearnSettings,
                   penalty: KLPenalty, seed: int, iteration: int) -> dict[str, float]:
    pad = host.tokenizer.pad_token_id
    exp, adv = experience.to_device(exp, adv, model_device(host.actor.model))
    counts = minibatch.Counts.of(exp.mask, adv.kept, experience.lengths(exp),
                                 settings.train.loss_normalizer, settings.max_len)

    def make_loss(mb):
        return _actor_loss(exp, adv, settings, penalty, pad,
                           lambda idx: counts.norm(mb, idx), iteration)

    ptx_cfg = settings.algo.ptx
    step_extra = None
    if ptx_cfg.enabled:
        texts = ptx.pretrain_ids(host, ptx_cfg)
        step_extra = lambda step: {"ptx": ptx.ptx_batch(texts, step, ptx_cfg.batch_size)}  # noqa: E731
    ema = host.ema
    return minibatch.train_steps(host.actor, minibatch.plan(seed, len(exp.responses), settings),
                                 settings, counts, make_loss, step_extra,
                                 None if ema is None else lambda: ema.update(host.actor.model))


def learn_actor(host: RLHost, rollouts: StepOutput, scores: StepOutput,
                reference: StepOutput | None, iteration: int, settings: LearnSettings,
                state: LearnState | None,
                values: StepOutput | None = None) -> LearnOutput:
    """Advantages, then PPO-clip updates of the policy (skipped while the actor is frozen)."""
    scope, start = current_scope(), time.perf_counter()
    if reference is None and settings.algo.kl.used:
        raise ConfigError("learn: algo.kl needs reference log-probs, but the flow ran no "
                          "reference step (declare the 'ref' role: RLConfig.roles())")
    host.wake("actor")
    _ = host.ema  # the policy's EMA starts from the weights before any step (when on)
    gpu_memory.start(host)
    exp = experience.load_experience(scope.store, rollouts, scores, reference, values)
    exp, refill = _refilled(exp, settings)
    pi_old = _pi_old(host, exp, settings)
    exp = experience.with_pi_old(exp, pi_old)
    penalty, moments = KLPenalty.of(settings.algo.kl, state), _moments(settings, state)
    adv = experience.compute(exp, settings, penalty.in_reward, moments)
    adv_ref = scope.write("rollout_advantages", experience.advantages_table(exp, adv, scope.task_key),
                          partition={"iter": iteration})
    scope.write("rollout_consumption", consumption_table(exp, scope.task_key, iteration,
                                                         host.policy_version),
                partition={"iter": iteration})
    metrics = adv.metrics | staleness_metrics(exp, host.policy_version) | \
        {"kl_coef": penalty.beta} | refill
    metrics |= mismatch.measure(host, exp, pi_old)
    if iteration > settings.critic.freezing_steps:  # OpenRLHF: frozen while step <= N
        metrics |= _update_policy(host, exp, adv, settings, penalty, scope.seed, iteration)
        host.policy_version += 1
    if "kl" in metrics:  # no reference ran when no KL term uses one
        penalty.update(metrics["kl"], len(exp.responses))
    folder = host.save(scope.store, f"runs/{scope.run_id}/checkpoints/{scope.task_key}", "actor")
    metrics |= gpu_memory.peak_metrics(host, "actor")
    host.idle("actor")
    metrics["learn_seconds"] = time.perf_counter() - start
    write_metrics(scope, [(iteration, metrics)], partition={"iter": iteration})
    next_state = LearnState(penalty.beta, moments.state() if moments else {})
    return LearnOutput(folder, host.policy_version, metrics, next_state, (adv_ref,))
