"""Critic-free RL: GRPO, Dr.GRPO, RLOO, REINFORCE++ and REINFORCE++-baseline.

They differ only in the advantage estimator (`algo.advantage.estimator`), so one loop
serves them all; each is registered under its own name with its own default estimator.

    prompts ← load once
    for each iteration:
        rollouts  ← generate(policy, next prompt batch, n samples each)
        scores    ← score(rollouts)                 ┐ in parallel
        reference ← reference logprobs(rollouts)    ┘
        policy    ← learn(rollouts, scores, reference)   (advantages inside)
        sync(policy → engine)
    export the final policy as an HF folder
"""

from __future__ import annotations

from alignflow.flows.engine import flow, gather
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.steps import (
    declare_hosts,
    learn_actor,
    on,
    reference_logprobs,
)
from alignflow.flows.shared_steps import (
    export_model,
    generate_rollouts,
    load_prompts,
    score_rollouts,
    sync_weights,
)


@flow(name="grpo")
def grpo(cfg: RLConfig) -> dict:
    prompts = load_prompts.options(key="prompts")(cfg.data, cfg.actor.model_name_or_path)
    iterations = cfg.iterations(prompts.rows)
    host = declare_hosts(cfg, ("actor", "ref", "reward"), iterations)
    state, history = None, []
    for it in range(iterations):
        k = f"iter-{it:04d}"
        rollouts = on(generate_rollouts, host["actor"], f"{k}/generate")(
            prompts, it, cfg.rollout)
        scores, ref = gather(
            on(score_rollouts, host["reward"], f"{k}/score").submit(rollouts, it),
            on(reference_logprobs, host["ref"], f"{k}/reference").submit(
                rollouts, it, cfg.rollout.micro_batch_size, cfg.rollout.temperature))
        learned = on(learn_actor, host["actor"], f"{k}/learn")(
            rollouts, scores, ref, it, cfg.learn, state)
        state = learned.state
        on(sync_weights, host["actor"], f"{k}/sync")(learned.checkpoint, learned.policy_version)
        history.append(scores.metrics["reward_mean"])
        every = cfg.ckpt.save_steps
        if every > 0 and (it + 1) % every == 0 and it + 1 < iterations:
            on(export_model, host["actor"], f"{k}/export")()
    final = on(export_model, host["actor"], "export")()
    return {"iterations": iterations, "reward_mean": history, "model": final["path"]}
