"""Critic-free RL: GRPO, Dr.GRPO, RLOO, REINFORCE++ and REINFORCE++-baseline.

They differ only in the advantage estimator (`algo.advantage.estimator`), so one loop
serves them all; each is registered under its own name with its own default estimator.

    prompts ← load once
    for each iteration:
        rollouts  ← take the committed batch (generated now, or ahead by the generator
                    worker in an asynchronous run; multi-turn episodes with an agent)
        scores    ← score(rollouts)                 ┐ in parallel
        reference ← reference logprobs(rollouts)    ┘ (only when a KL term uses them)
        policy    ← learn(rollouts, scores, reference)   (advantages inside; generation
                    for the next iterations runs meanwhile when asynchronous)
        the new policy reaches the generator (sync, or the next batches' weights)
        every eval.steps iterations: evaluate on the eval prompts (eval/*, best export)
    export the final policy as an HF folder
"""

from __future__ import annotations

from alignflow.flows.engine import flow, gather
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.pipeline import start
from alignflow.flows.rl.shared_steps import export_model
from alignflow.flows.rl.steps import learn_actor, on, reference_step


@flow(name="grpo")
def grpo(cfg: RLConfig) -> dict:
    _prompts, iterations, _plan, host, source, evals = start(cfg)
    state, history = None, []
    for it in range(iterations):
        k = f"iter-{it:04d}"
        rollouts = source.take(it)
        if rollouts is None:  # older than the staleness bound and dropped
            continue
        scores, ref = gather(
            source.score(rollouts, it),
            reference_step(cfg, host, f"{k}/reference", rollouts, it))  # None without KL
        learned = source.learn(on(learn_actor, host["actor"], f"{k}/learn").submit(
            rollouts, scores, ref, it, cfg.learn, state), it)
        state = learned.state
        history.append(scores.metrics["reward_mean"])
        evals.after(it, source.latest)  # every eval.steps iterations: eval/*, best export
        if cfg.ckpt.hf_export_due(it + 1, iterations):
            on(export_model, host["actor"], f"{k}/export")()
    final = on(export_model, host["actor"], "export")()
    return {"iterations": iterations, "reward_mean": history, "model": final["path"],
            **evals.output}
