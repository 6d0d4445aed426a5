"""Where an RL flow's batches come from, and where its new weights go.

`SyncRollouts` is the synchronous loop on the actor's host: generate, learn, sync the
weights in memory. `ScheduledRollouts` generates on a worker of its own (`rollout`): while
iteration k learns, the batches of k+1 … k+s (s = `async.max_staleness`) are generated with
the policy after k+1−s … k learn steps — each generation task names those weights, so the
schedule, and with it every batch, follows from the config alone (bitwise the same on the
inline and the Ray executor, killed and resumed or not). s = 0 with a generator worker is
the synchronous loop with the two roles apart (the weights go through the checkpoint).

The learner consumes committed batches only. A batch older than the bound when its learn
step comes — which the schedule itself never produces, but a replayed schedule may — is
regenerated with the current weights or dropped (`async.on_stale`), and counted in metrics.
"""

from __future__ import annotations

import time
from typing import Protocol

from alignflow.flows.engine import Done, task, wait_durable
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.shared_steps import generate_rollouts, score_rollouts, sync_weights
from alignflow.flows.rl.steps import on
from alignflow.flows.seams import Future
from alignflow.tasks.plan.build import GENERATOR
from alignflow.tasks.plan.placement import Role
from alignflow.tasks.rl.async_records import PolicyRef
from alignflow.tasks.steps.records import LearnOutput, StepOutput

generate_at = task(version=1)("alignflow.tasks.rl.async_generate:generate_at")
drop_batch = task(version=1)("alignflow.tasks.rl.async_generate:drop_batch")
agent_episodes = task(version=1)("alignflow.tasks.rl.episodes:agent_episodes")


def key(iteration: int) -> str:
    return f"iter-{iteration:04d}"


class RolloutSource(Protocol):
    """What an RL flow's loop reads: the batch each iteration learns from, its rewards, the
    learn step's weights served to generation, and the newest policy (`rollouts_for`)."""

    @property
    def latest(self) -> PolicyRef | None:
        """The newest policy of a generator worker (None: the actor host's engine has it)."""

    def take(self, it: int) -> StepOutput | None:
        """The committed batch iteration `it` learns from (None: dropped as too stale)."""

    def score(self, batch: StepOutput, it: int) -> Future:
        """A future of the batch's rewards."""

    def learn(self, future: Future, it: int) -> LearnOutput:
        """Wait for the learn step `future`, then serve its weights."""


class SyncRollouts:
    """Generate on the actor's host; after each learn, copy the weights to its engine."""

    def __init__(self, cfg: RLConfig, prompts: StepOutput, hosts: dict[Role, str],
                 iterations: int) -> None:
        self.cfg, self.prompts, self.hosts, self.iterations = cfg, prompts, hosts, iterations

    @property
    def latest(self) -> PolicyRef | None:
        """The newest policy of a generator worker (None: the actor host's engine has it)."""
        return None

    def take(self, it: int) -> StepOutput | None:
        """The committed batch iteration `it` learns from (None: dropped as too stale)."""
        return on(generate_rollouts, self.hosts["actor"], f"{key(it)}/generate")(
            self.prompts, it, self.cfg.rollout, max_len=self.cfg.data.max_len)

    def score(self, batch: StepOutput, it: int) -> Future:
        """A future of the batch's rewards."""
        return on(score_rollouts, self.hosts["reward"], f"{key(it)}/score").submit(batch, it)

    def learn(self, future: Future, it: int) -> LearnOutput:
        """Wait for the learn step `future`, then serve its weights."""
        learned = future.result()
        on(sync_weights, self.hosts["actor"], f"{key(it)}/sync")(learned.checkpoint,
                                                                 learned.policy_version)
        return learned


class ScheduledRollouts(SyncRollouts):
    """Generation on the `rollout` worker, up to `async.max_staleness` batches ahead."""

    def __init__(self, cfg: RLConfig, prompts: StepOutput, hosts: dict[Role, str],
                 iterations: int) -> None:
        super().__init__(cfg, prompts, hosts, iterations)
        self.bound = cfg.staleness
        self.agent_enabled = cfg.train.agent_func_path is not None
        self.published = [PolicyRef(0, None)]  # the policy after k learn steps, k = 0, 1, …
        self.pending: dict[int, Future] = {}    # iteration -> future of its batch
        self.ready: dict[int, StepOutput] = {}  # batches committed, not yet learned from
        self.scores: dict[int, StepOutput] = {}  # agent episodes: rewards come with the batch

    @property
    def latest(self) -> PolicyRef | None:
        return self.published[-1]

    def policy_for(self, it: int) -> PolicyRef:
        """The weights batch `it` is sampled with: the policy after it − s learn steps."""
        return self.published[max(0, it - self.bound)]

    def take(self, it: int) -> StepOutput | None:
        last = min(it + self.bound, self.iterations - 1)
        for j in range(it, last + 1):  # every batch whose weights exist is started now
            if j not in self.pending and j not in self.ready and \
                    max(0, j - self.bound) < len(self.published):
                self.pending[j] = self._generate(j, self.policy_for(j), "generate")
        batch = self.ready.pop(it) if it in self.ready else self._result(self.pending.pop(it), it)
        self._collect()  # inline, the batches ahead are generated already: commit them now
        return self._checked(it, batch)

    def _generate(self, it: int, policy: PolicyRef, name: str, **extra: object) -> Future:
        if self.agent_enabled:
            return on(agent_episodes, GENERATOR, f"{key(it)}/{name}").submit(
                self.prompts, it, self.cfg.rollout, self.cfg.agent, policy, **extra)
        return on(generate_at, GENERATOR, f"{key(it)}/{name}").submit(
            self.prompts, it, self.cfg.rollout, policy, **extra)

    def _result(self, future: Future, it: int) -> StepOutput:
        out = future.result()
        if self.agent_enabled:
            self.scores[it] = out.scores
            return out.rollouts
        return out

    def _checked(self, it: int, batch: StepOutput) -> StepOutput | None:
        """The batch, or its regeneration / None when it is older than the bound."""
        staleness = self.published[-1].version - int(batch.metrics["policy_version_min"])
        if staleness <= self.bound:
            return batch
        if self.cfg.async_.on_stale == "drop":
            on(drop_batch, GENERATOR, f"{key(it)}/drop")(it, staleness)
            return None
        offset = self.cfg.rollout.n_samples_per_prompt
        future = self._generate(it, self.published[-1], "regenerate", sample_offset=offset,
                                replaces_staleness=staleness)
        return self._result(future, it)

    def score(self, batch: StepOutput, it: int) -> Future:
        if it in self.scores:
            return Done(self.scores.pop(it))
        return super().score(batch, it)

    def learn(self, future: Future, it: int) -> LearnOutput:
        self._commit_ready(future)
        learned = future.result()
        self.published.append(self.durable_policy(learned))
        return learned

    @staticmethod
    def durable_policy(learned: LearnOutput) -> PolicyRef:
        """The weights `learned` made, once its checkpoint is in the store: the generator
        loads them from there, and the learn task hands them on before they are written."""
        wait_durable()
        return PolicyRef(learned.policy_version, learned.checkpoint)

    def _commit_ready(self, learning: Future, poll_s: float = 0.02) -> None:
        """While the learn step runs, commit each batch the generator finishes, so a crash
        loses no batch that was generated (the store is the buffer)."""
        while True:
            self._collect()
            if learning.done():
                return
            time.sleep(poll_s)

    def _collect(self) -> None:
        """Commit the generated batches that are finished (never waits)."""
        for it in [j for j, f in self.pending.items() if f.done()]:
            self.ready[it] = self._result(self.pending.pop(it), it)
