"""On-policy distillation: the student generates, a teacher scores the student's own tokens,
and the per-token reverse KL to the teacher is the advantage (`tasks/advantages/distill.py`).

    prompts ← load once
    for each iteration:
        rollouts ← the student's samples (synchronous, or ahead on the generator worker)
        scores   ← score(rollouts)                          ┐ in parallel
        teacher  ← teacher log-probs of the student's tokens ┘ (the `ref` role's host)
        policy   ← learn(rollouts, scores, teacher): A_t = β·(log π_T − log π_S)_t + (r − b)
        the new policy reaches the generator
    export the final policy

Each step is a durable task as in GRPO; the teacher's log-probs are committed per token
(`rollout_teacher`). The teacher takes the reference's place in the learn step, so a
separate KL to a reference is not available in this flow. On any RL flow the same advantage
is `algo.advantage.estimator=on_policy_distill` with `ref.model_name_or_path` = the teacher
(its log-probs then land in `rollout_reference`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.errors import require
from alignflow.flows.compat import aliases
from alignflow.flows.engine import flow, gather, task
from alignflow.flows.rl.config import RLConfig, _estimator
from alignflow.flows.rl.pipeline import start
from alignflow.flows.rl.shared_steps import export_model
from alignflow.flows.rl.steps import learn_actor, on
from alignflow.tasks.modeling.model_config import TeacherConfig
from alignflow.tasks.plan.placement import Role
from alignflow.tasks.rl.learn_config import AlgoConfig, KLConfig

teacher_logprobs = task(version=1)("alignflow.tasks.rl.distill_online:teacher_logprobs")


def _distill_algo() -> AlgoConfig:
    return _estimator("on_policy_distill", kl=KLConfig(init_coef=1.0))()


@dataclass(frozen=True, kw_only=True)
class OnPolicyDistillConfig(RLConfig):
    """On-policy distillation: algo.kl.init_coef is β, the teacher term's weight (k1, in the
    reward); the task reward enters with weight 1 after its baseline.

    teacher: the teacher whose log-probs of the student's tokens make the advantage
    """

    algo: AlgoConfig = field(default_factory=_distill_algo)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    # OpenRLHF's train_kd (to v0.9.5) and TRL's GKD / on-policy distillation name the teacher
    ALIASES: ClassVar[dict[str, aliases.Target]] = {
        **aliases.RL, "teacher_model": "teacher.model_name_or_path",
        "teacher_model_name_or_path": "teacher.model_name_or_path"}

    def __post_init__(self) -> None:
        super().__post_init__()
        require(bool(self.teacher.model_name_or_path), "teacher.model_name_or_path",
                "the teacher model (--teacher_model NAME_OR_PATH)", None)
        kl = self.algo.kl
        require(self.algo.advantage.estimator == "on_policy_distill",
                "algo.advantage.estimator", "on_policy_distill in this flow",
                self.algo.advantage.estimator)
        require(kl.init_coef > 0 and kl.target is None, "algo.kl.init_coef",
                "a fixed β > 0 (the teacher term's weight; algo.kl.target null)", kl.init_coef)
        require(kl.estimator == "k1" and not kl.use_loss, "algo.kl.estimator",
                "k1 in the reward (log π_S − log π_T per token; algo.kl.use_loss false)",
                kl.estimator)


def teacher_step(cfg: OnPolicyDistillConfig, host: dict[Role, str], key: str, rollouts,
                 it: int):
    """The teacher's log-probs of batch `rollouts`, on the reference's host (a future)."""
    budget = {"max_tokens": cfg.rollout_max_tokens} if cfg.rollout_max_tokens else {}
    return on(teacher_logprobs, host["ref"], key).submit(
        rollouts, it, cfg.teacher.model_name_or_path, cfg.rollout.micro_batch_size,
        cfg.rollout.temperature, **budget)


@flow(name="on_policy_distill")
def on_policy_distill(cfg: OnPolicyDistillConfig) -> dict:
    _prompts, iterations, _plan, host, source, evals = start(cfg)
    state, history, kl = None, [], []
    for it in range(iterations):
        k = f"iter-{it:04d}"
        rollouts = source.take(it)
        if rollouts is None:  # older than the staleness bound and dropped
            continue
        scores, teacher = gather(source.score(rollouts, it),
                                 teacher_step(cfg, host, f"{k}/teacher", rollouts, it))
        learned = source.learn(on(learn_actor, host["actor"], f"{k}/learn").submit(
            rollouts, scores, teacher, it, cfg.learn, state), it)
        state = learned.state
        history.append(scores.metrics["reward_mean"])
        kl.append(learned.metrics.get("kl"))
        evals.after(it, source.latest)
        if cfg.ckpt.hf_export_due(it + 1, iterations):
            on(export_model, host["actor"], f"{k}/export")()
    final = on(export_model, host["actor"], "export")()
    return {"iterations": iterations, "reward_mean": history, "teacher_kl": kl,
            "model": final["path"], **evals.output}
