"""Dynamic filtering that refills, as OpenRLHF does: an iteration draws prompts in rounds
until `rollout.batch_size` groups pass the filter, and the learn step trains on the first
`rollout.batch_size` of them (`tasks/rl/experience.first_groups`).

A round draws `rollout.vllm_generate_batch_size` prompts (default `rollout.batch_size`),
continuing where the previous round (of this or an earlier iteration) stopped, generates
and scores them (`iter-NNNN/generate`, `/score`; then `/generate-1`, `/score-1`, ...). The
number of rounds follows from committed scores only, so a resumed run draws exactly the
prompts an uninterrupted one did. A round draws at most every prompt once, and an iteration
stops before it would draw a prompt twice (one pass over the prompt data; it then trains on
the groups that passed). Only the first round's metrics are the iteration's (`rollout/*`);
the learn step reports the pass rate.
"""

from __future__ import annotations

import dataclasses

from alignflow.flows.engine import Done
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.rollouts import SyncRollouts, key
from alignflow.flows.rl.shared_steps import generate_rollouts, score_rollouts
from alignflow.flows.rl.steps import on
from alignflow.flows.seams import Future
from alignflow.tasks.plan.placement import Role
from alignflow.tasks.steps.records import StepOutput


class RefilledRollouts(SyncRollouts):
    """`SyncRollouts` whose batches are refilled until enough groups pass the filter."""

    def __init__(self, cfg: RLConfig, prompts: StepOutput, hosts: dict[Role, str],
                 iterations: int) -> None:
        super().__init__(cfg, prompts, hosts, iterations)
        self.cursor = 0  # the next prompt to draw
        self.per_round = min(cfg.rollout.prompts_per_round, prompts.rows)
        self.max_rounds = max(1, prompts.rows // self.per_round)
        self.scores: dict[int, StepOutput] = {}

    def take(self, it: int) -> StepOutput:
        rollout = dataclasses.replace(self.cfg.rollout, batch_size=self.per_round)
        algo, wanted = self.cfg.algo, self.cfg.rollout.batch_size
        filtering = (rollout.n_samples_per_prompt, *algo.dynamic_filtering_range)
        batches, scores, passed = [], [], 0
        for r in range(self.max_rounds):
            tail, quiet = ("" if r == 0 else f"-{r}"), r > 0
            batch = on(generate_rollouts, self.hosts["actor"], f"{key(it)}/generate{tail}")(
                self.prompts, it, rollout, max_len=self.cfg.data.max_len, start=self.cursor,
                quiet=quiet)
            scored = on(score_rollouts, self.hosts["reward"], f"{key(it)}/score{tail}")(
                batch, it, filtering=filtering, quiet=quiet)
            self.cursor += self.per_round
            batches.append(batch)
            scores.append(scored)
            # a run scored before refills existed counted nothing: it never refilled
            passed += int(scored.metrics.get("filter_groups_passed", wanted))
            if passed >= wanted:
                break
        self.scores[it] = _merged(scores)
        return _merged(batches)

    def score(self, batch: StepOutput, it: int) -> Future:
        return Done(self.scores.pop(it))


def _merged(outputs: list[StepOutput]) -> StepOutput:
    """The rounds' tables as one step output (the first round's metrics)."""
    refs = tuple(ref for out in outputs for ref in out.refs)
    return StepOutput(refs, sum(out.rows for out in outputs), dict(outputs[0].metrics))
