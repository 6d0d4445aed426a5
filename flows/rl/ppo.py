"""PPO with a critic: GAE advantages from critic values, clipped policy and value losses.

    prompts ← load once
    for each iteration:
        rollouts ← generate(policy)   (with dynamic filtering: refilled, `refill.py`)
        scores, reference, values ← score / reference logprobs / critic values  (parallel)
        policy ← learn_actor(...)   (GAE advantages and returns committed here)
        critic ← learn_critic(returns)
        sync(policy → engine)
        every eval.steps iterations: evaluate on the eval prompts (eval/*, best export)

With an estimator other than `gae` (OpenRLHF's `--advantage_estimator` under train_ppo_ray)
no critic is loaded, run or trained: nothing would read its values.
"""

from __future__ import annotations

from alignflow.flows.engine import flow, gather
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.pipeline import start
from alignflow.flows.rl.shared_steps import export_model, sync_weights
from alignflow.flows.rl.steps import critic_values, learn_actor, learn_critic, on, reference_step


@flow(name="ppo")
def ppo(cfg: RLConfig) -> dict:
    _prompts, iterations, plan, host, source, evals = start(cfg)
    critic = "critic" in plan.roles
    state, history = None, []
    for it in range(iterations):
        k = f"iter-{it:04d}"
        rollouts = source.take(it)
        if rollouts is None:  # older than the staleness bound and dropped (as in grpo.py)
            continue
        pending = [source.score(rollouts, it),
                   reference_step(cfg, host, f"{k}/reference", rollouts, it)]
        if critic:
            budget = {"max_tokens": cfg.rollout_max_tokens} if cfg.rollout_max_tokens else {}
            pending.append(on(critic_values, host["critic"], f"{k}/values").submit(
                rollouts, it, cfg.rollout.micro_batch_size, **budget))
        scores, ref, *valued = gather(*pending)
        values = valued[0] if critic else None
        learned = on(learn_actor, host["actor"], f"{k}/learn")(
            rollouts, scores, ref, it, cfg.learn, state, values=values)
        state = learned.state
        if critic:
            on(learn_critic, host["critic"], f"{k}/learn_critic")(
                rollouts, values, it, cfg.learn, learned)
        on(sync_weights, host["actor"], f"{k}/sync")(learned.checkpoint, learned.policy_version)
        history.append(scores.metrics["reward_mean"])
        evals.after(it)  # every eval.steps iterations: eval/* metrics, the best export
        if cfg.ckpt.hf_export_due(it + 1, iterations):
            on(export_model, host["actor"], f"{k}/export")()
    final = on(export_model, host["actor"], "export")()
    out = {"iterations": iterations, "reward_mean": history, "model": final["path"],
           **evals.output}
    if critic and cfg.critic.save_value_network:
        out["critic"] = on(export_model, host["critic"], "export_critic")("critic",
                                                                         role="critic")["path"]
    return out
