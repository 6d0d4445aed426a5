"""Partial rollouts: batches generated in segments on the generator worker; a weight update
that lands while a batch is being generated reaches its unfinished responses at the next
segment boundary (OpenRLHF's `--partial_rollout`, without its in-memory queue).

The first segment of batch k is sampled with the policy the schedule gives it (after k − s
learn steps); each later segment with the newest policy whose learn step has committed
when the segment starts. On the Ray executor that depends on timing, so every segment's
version is recorded (its task output, and `version_spans` of the rows), and a new run with
`async.replay_schedule=<run id>` follows the recorded versions and ends with the same
weights. On the inline executor a learn step is over before the next segment starts, so
the schedule is fixed and a rerun reproduces it without a replay.
"""

from __future__ import annotations

from alignflow.errors import ConfigError
from alignflow.flows.engine import task
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.rollouts import ScheduledRollouts, key
from alignflow.flows.rl.steps import on
from alignflow.flows.seams import Future
from alignflow.tasks.plan.build import GENERATOR
from alignflow.tasks.plan.placement import Role
from alignflow.tasks.rl.async_records import PolicyRef, SegmentOutput
from alignflow.tasks.steps.records import LearnOutput, StepOutput

generate_segment = task(version=1)("alignflow.tasks.rl.segments:generate_segment")
recorded_versions = task(version=1)("alignflow.tasks.rl.schedule:recorded_versions")


def segment_key(it: int, segment: int) -> str:
    return f"{key(it)}/generate-s{segment:02d}"


class PartialRollouts(ScheduledRollouts):
    """Drives the generator one segment at a time, in batch order."""

    def __init__(self, cfg: RLConfig, prompts: StepOutput, hosts: dict[Role, str],
                 iterations: int) -> None:
        super().__init__(cfg, prompts, hosts, iterations)
        if cfg.rollout.max_new_tokens is None:  # refused with the config (`RLConfig`)
            raise ConfigError("asynchronous generation needs rollout.max_new_tokens")
        self.tokens = cfg.async_.segment_length(cfg.rollout.max_new_tokens)
        self.segments: dict[int, list[SegmentOutput]] = {}
        self.finished: dict[int, StepOutput] = {}
        self.cursor = 0          # the oldest batch not yet finished
        self.learning: Future | None = None  # the learn step in flight
        self.replay = None
        if cfg.async_.replay_schedule:
            self.replay = recorded_versions.options(key="schedule")(cfg.async_.replay_schedule)

    def take(self, it: int) -> StepOutput | None:
        while it not in self.finished:
            self._advance()
        return self._checked(it, self.finished.pop(it))

    def learn(self, future: Future, it: int) -> LearnOutput:
        """Generate the batches ahead (up to the bound) while the learn step runs."""
        self.learning = future
        last = min(it + self.bound, self.iterations - 1)
        while self.learning is not None and self.cursor <= last:
            self._advance()
            self._poll()
        if self.learning is not None:
            self._publish(self.learning.result())
        return self.last_learned

    def _poll(self) -> None:
        """Publish the learn step in flight if it has finished (never waits)."""
        if self.learning is not None and self.learning.done():
            self._publish(self.learning.result())

    def _publish(self, learned: LearnOutput) -> None:
        self.published.append(self.durable_policy(learned))
        self.last_learned, self.learning = learned, None

    def _policy(self, it: int, segment: int) -> PolicyRef:
        """The weights segment `segment` of batch `it` is sampled with."""
        if self.replay is not None:
            if segment_key(it, segment) not in self.replay:
                raise ConfigError(f"async.replay_schedule={self.cfg.async_.replay_schedule!r} "
                                  f"has no segment {segment_key(it, segment)!r}; replay a run "
                                  "of the same config")
            return self._recorded(self.replay[segment_key(it, segment)])
        if segment == 0:
            return self.policy_for(it)
        self._poll()
        return self.published[-1]

    def _recorded(self, version: int) -> PolicyRef:
        """The published policy of `version`, waiting for the learn step that makes it. A
        run that dropped a batch never makes some recorded versions: it uses its newest."""
        while self.published[-1].version < version and self.learning is not None:
            self._publish(self.learning.result())
        version = min(version, self.published[-1].version)
        return next(p for p in reversed(self.published) if p.version <= version)

    def _advance(self) -> None:
        """Run the next segment of the oldest unfinished batch (waits for it)."""
        it = self.cursor
        done = tuple(self.segments.setdefault(it, []))
        out = on(generate_segment, GENERATOR, segment_key(it, len(done)))(
            self.prompts, it, self.cfg.rollout, self._policy(it, len(done)), done, self.tokens)
        self.segments[it].append(out)
        if out.rollouts is not None:
            self.finished[it] = out.rollouts
            self.cursor += 1
