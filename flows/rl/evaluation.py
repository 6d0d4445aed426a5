"""Evaluation in the RL flows (`eval.*`, OpenRLHF's `--eval_dataset` / `--eval_steps`).

Before the first iteration (`eval.at_start`: `start/eval_*`, iteration -1) and after every
`eval.steps`-th iteration (its learn step and sync done), the policy answers
the eval prompts (`iter-NNNN/eval_generate`, on the actor's host; in an asynchronous run on
the generator worker with the newest policy) and the run's rewards score them
(`iter-NNNN/eval_score`, on the reward host; agent runs: `iter-NNNN/eval`, episodes and
their environment rewards): `eval/*` metrics of the iteration (`tasks/rl/evaluate.py`). When `ckpt.best_metric_key`'s metric beats every earlier value,
the policy is exported to `runs/<id>/final/best` (`iter-NNNN/export_best`), as OpenRLHF saves
its best checkpoint. The best so far is computed from the journalled evaluations, so a
resumed run decides as the uninterrupted one did.
"""

from __future__ import annotations

import dataclasses

from alignflow.flows.engine import task
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.shared_steps import export_model, load_prompts
from alignflow.flows.rl.steps import on
from alignflow.tasks.plan.build import GENERATOR
from alignflow.tasks.plan.placement import Role
from alignflow.tasks.rl.async_records import PolicyRef
from alignflow.tasks.rl.eval_config import best_key

eval_generate = task(version=1)("alignflow.tasks.rl.evaluate:eval_generate")
eval_score = task(version=2)("alignflow.tasks.rl.evaluate:eval_score")
agent_eval = task(version=1)("alignflow.tasks.rl.evaluate:agent_eval")


class Evaluation:
    """The evaluations of one run and the best one so far."""

    def __init__(self, cfg: RLConfig, hosts: dict[Role, str]) -> None:
        self.cfg, self.hosts, self.prompts = cfg, hosts, None
        self.best: dict | None = None

    def start(self, policy: PolicyRef | None = None) -> None:
        """Evaluate the untrained policy (`start/eval_*`, iteration -1) when
        `eval.at_start`: the first point of the curve."""
        if self.cfg.eval.at_start_due:
            self._evaluate(-1, "start", policy)

    def after(self, it: int, policy: PolicyRef | None = None) -> None:
        """Evaluate after iteration `it` (0-based) when due: on the actor's host, or with
        a generator worker's `policy` (the newest) on that worker."""
        if self.cfg.eval.due(it + 1):
            self._evaluate(it, f"iter-{it:04d}", policy)

    def _evaluate(self, it: int, k: str, policy: PolicyRef | None) -> None:
        cfg = self.cfg
        if cfg.eval.dataset is None:  # never: `eval.due` is False without a data set
            return
        if self.prompts is None:
            data = dataclasses.replace(cfg.data, prompt_dataset=cfg.eval.dataset,
                                       prompt_split=cfg.eval.split, prompt_probs=None,
                                       shuffle=False)
            self.prompts = load_prompts.options(key="eval_prompts")(
                data, cfg.actor.model_name_or_path, cfg.rollout.max_new_tokens)
        sampling = dataclasses.replace(cfg.rollout, temperature=cfg.eval.temperature,
                                       n_samples_per_prompt=cfg.eval.n_samples_per_prompt)
        if cfg.train.agent_func_path is not None:  # episodes: the environment rewards
            scored = on(agent_eval, GENERATOR, f"{k}/eval")(self.prompts, it, sampling,
                                                            cfg.agent, policy)
        else:
            where, extra = (self.hosts["actor"], {}) if policy is None else \
                (GENERATOR, {"policy": policy})
            samples = on(eval_generate, where, f"{k}/eval_generate")(
                self.prompts, it, sampling, max_len=cfg.data.max_len, **extra)
            scored = on(eval_score, self.hosts["reward"], f"{k}/eval_score")(
                samples, it, cfg.eval.n_samples_per_prompt)
        if it >= 0:  # the untrained policy is no export
            self._keep_best(it, scored.metrics)

    def _keep_best(self, it: int, metrics: dict[str, float]) -> None:
        name = best_key(self.cfg.ckpt.best_metric_key, metrics)
        if name is None or (self.best is not None and metrics[name] <= self.best["value"]):
            return
        path = on(export_model, self.hosts["actor"], f"iter-{it:04d}/export_best")("best")
        self.best = {"metric": name, "value": metrics[name], "iteration": it,
                     "path": path["path"]}

    @property
    def output(self) -> dict:
        """What the flow's output says of the evaluations: the best export."""
        return {} if self.best is None else {"best": self.best}
