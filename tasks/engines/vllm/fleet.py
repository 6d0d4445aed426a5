"""Which of a host's engine actors serve now: answers gathered with a deadline, engines
that died or missed it started again, and those still starting kept out of the way.

An engine restarts in the background (Ray starts a named one again by itself; an unnamed
one is killed and spawned anew): the others go on generating and syncing without it. Once
its start answers it is up again, but behind — it holds the weights it was built or loaded
with — so it serves nothing until a sync or a checkpoint load gives it the version the
others serve (`VLLMEngineActor._target`); the host's check before each generate sees the
older `policy_version` and syncs it. An engine lost between two calls is seen by the
next wait on it in Ray's control store (`detached.not_alive`), not when its restart
answers the call sent to it: the generate samples its shard elsewhere, the sync goes on
without it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from alignflow import detached
from alignflow.errors import EngineError
from alignflow.tasks.engines.vllm import liveness, placement
from alignflow.tasks.engines.vllm.engine_host import UNKNOWN_VERSION


@dataclass
class Answers:
    """One call per key (an engine, or a shard of a generate): what came back."""

    results: dict = field(default_factory=dict)
    failed: dict[object, str] = field(default_factory=dict)  # key -> why (died, too late)
    late: set = field(default_factory=set)  # keys that missed the deadline
    stale: list = field(default_factory=list)  # keys whose engine Ray restarted


class EngineFleet:
    """Mixed into `VLLMEngineActor` (its `_actors`, `_versions`, `_starting`, `_target`,
    `_restarts`, `_sender`, `_checkpoint`, `_names`, `_groups`, `config` and `_spawn`)."""

    @property
    def policy_version(self) -> int:
        """The oldest version an engine that is up serves (one still starting counts once
        it is up: it is then behind, and the host syncs it)."""
        up = [v for i, v in enumerate(self._versions) if i not in self._starting]
        return min(up or self._versions)

    def _ready(self, every: bool = False) -> None:
        """Engines whose restart answered are up again. `every`: wait for all of them (a
        call every engine must take); else wait only when none is up."""
        if not self._starting:
            return
        if every or len(self._starting) == len(self._actors):
            starting, self._starting = self._starting, {}
            self._wait(starting, self.config.startup_timeout_s, "restart", starts=True)
            return
        import ray

        refs = list(self._starting.values())
        done = {r.hex() for r in ray.wait(refs, num_returns=len(refs), timeout=0)[0]}
        up = {i: r for i, r in self._starting.items() if r.hex() in done}
        for i in up:
            del self._starting[i]
        if up:  # a start that failed is started afresh; the engines up meanwhile go on
            answers = self._gather(up, 0.0, "restart", watch=False)
            self._settle(answers.failed, answers.stale, late=set(answers.failed))

    def _live(self) -> dict[int, object]:
        """{index: actor} of the engines up (waits for restarts when none is)."""
        self._ready()
        return {i: a for i, a in enumerate(self._actors) if i not in self._starting}

    def _serving(self) -> list[int]:
        """The engines up that serve the version last synced or loaded."""
        return [i for i in self._live() if self._versions[i] == self._target]

    def _gather(self, calls: dict, timeout_s: float, what: str, *, watch: bool = True,
                engine_of: dict | None = None, alive: bool = False) -> Answers:
        """Wait for one call per key (an engine, or a generate's shard: `engine_of` maps it
        to its engine) up to `timeout_s`; `alive` (a generate): for as long as its engine
        makes progress, hung after `timeout_s` without (`vllm_liveness`). `watch`: the
        engines are up, so one that Ray reports lost meanwhile fails its calls at once (a
        call sent to it would wait for its restart); not for calls that wait for a start."""
        import ray
        from ray import exceptions as rex

        engine_of = engine_of or {key: key for key in calls}
        lost: set = set()
        if alive:
            done = self._wait_alive(calls, timeout_s, what, engine_of, lost)
        else:
            done = self._wait_deadline(calls, timeout_s, what, engine_of, lost if watch else None)
        late = f"no progress for {timeout_s:g}s" if alive else f"no answer within {timeout_s:g}s"
        out = Answers()
        for key, ref in calls.items():
            if key in lost:
                out.failed[key] = "its process was lost (Ray is starting it again)"
                continue
            if key not in done:
                out.failed[key] = late
                out.late.add(key)
                continue
            try:
                out.results[key] = ray.get(ref)
            except (rex.RayActorError, rex.WorkerCrashedError) as exc:
                out.failed[key] = f"actor died ({type(exc).__name__})"
            except EngineError:
                out.stale.append(key)
        return out

    def _lost(self, keys: list, engine_of: dict) -> set:
        """The keys whose engine Ray's control store reports lost (`detached.not_alive`)."""
        return detached.not_alive({key: self._actors[engine_of[key]] for key in keys})

    def _wait_deadline(self, calls: dict, timeout_s: float, what: str, engine_of: dict,
                       lost: set | None) -> set:
        """The keys whose call answered within `timeout_s` (`lost` collects the lost ones)."""
        key_of = {ref.hex(): key for key, ref in calls.items()}

        def gone(pending: list) -> list:
            found = self._lost([key_of[r.hex()] for r in pending], engine_of)
            lost.update(found)
            return [calls[key] for key in found]

        ready = placement.wait_said(list(calls.values()), timeout_s,
                                    lambda n: f"vLLM {what}: {n} of {len(calls)} engines "
                                              "answered", lost=gone if lost is not None else None)
        return {key_of[ref.hex()] for ref in ready}

    def _wait_alive(self, calls: dict, window_s: float, what: str, engine_of: dict,
                    lost: set) -> set:
        """The keys whose call answered while its engine made progress (`lost` collects
        the lost ones; the others, quiet for `window_s`, are hung)."""
        import ray

        def wait(pending: list, seconds: float) -> set:
            refs = [calls[key] for key in pending]
            came = {r.hex() for r in ray.wait(refs, num_returns=len(refs), timeout=seconds)[0]}
            found = self._lost([key for key in pending if calls[key].hex() not in came],
                               engine_of)
            lost.update(found)
            return {key for key in pending if calls[key].hex() in came} | found

        def say(pending: list, elapsed: float, quiet: float) -> None:
            print(f"alignflow: vLLM {what}: {len(calls) - len(pending)} of {len(calls)} "
                  f"engines answered; {elapsed:.0f}s, the others quiet for at most {quiet:.0f}s "
                  f"(hung after {window_s:g}s without progress: vllm.generate_timeout_s)",
                  file=sys.stderr, flush=True)

        done, _hung = liveness.wait_alive(
            calls, window_s, wait=wait, say=say,
            ask=liveness.AskActors(lambda key: self._actors[engine_of[key]]))
        return done - lost

    def _settle(self, failed: dict[int, str], stale: list[int], late: set = frozenset()) -> None:
        """Engines that died or came back from Ray's restart are started (or given weights)
        again; a named one that died is being restarted by Ray already (`late` ones, which
        may hang, are killed and started anew)."""
        if stale:
            self._close_sync(survivors=self._actors)
        for index in sorted(set(stale)):
            self._after_ray_restart(index)
        self._restarts.update(failed.keys())  # +1 per engine lost
        for index in sorted(failed):
            if self._names and index not in late:
                self._close_sync(survivors=[a for i, a in enumerate(self._actors) if i != index])
                self._starting[index] = self._actors[index].version.remote()  # up once Ray is done
                self._after_ray_restart(index)
            else:
                self._restart(index)
        looping = {i: n for i, n in self._restarts.items() if n > detached.HELPER_RESTARTS}
        if looping:  # the run's recovery budget takes it from here (a retried task)
            self._restarts.clear()
            raise EngineError(f"vLLM engines {sorted(looping)} died more than "
                              f"{detached.HELPER_RESTARTS} times in this host's life; "
                              "restarted them")

    def _wait(self, calls: dict[int, object], timeout_s: float, what: str, *,
              starts: bool = False) -> list:
        """Results of one call per engine, in engine order. Engines that miss the deadline
        or whose actor died are started again (afresh, when the calls were their `starts`),
        then the call raises `EngineError`."""
        answers = self._gather(calls, timeout_s, what, watch=not starts)
        self._settle(answers.failed, answers.stale,
                     set(answers.failed) if starts else answers.late)
        if answers.failed:
            engines = "; ".join(f"engine {i}: {why}" for i, why in answers.failed.items())
            raise EngineError(f"vLLM {what} failed on {len(answers.failed)} of {len(calls)} "
                              f"engines ({engines}); restarted them, serving policy version "
                              f"{self.policy_version}")
        if answers.stale:
            raise EngineError(f"vLLM {what}: engines {sorted(answers.stale)} were restarted "
                              "by Ray and serve unknown weights; they are synced before the retry")
        return [answers.results[i] for i in calls]

    def _restart(self, index: int) -> None:
        import ray

        ray.kill(self._actors[index], no_restart=True)
        if self._names:
            detached.discard([self._names[index]])  # its name free for the new one
        self._close_sync(survivors=[a for i, a in enumerate(self._actors) if i != index])
        store, rel_dir, version = self._checkpoint or (None, None, self._initial_version)
        self._actors[index] = self._spawn(index, version, self._groups[index])
        if store is not None:
            self._actors[index].load_checkpoint.remote(store, rel_dir, version)
        self._starting[index] = self._actors[index].version.remote()
        self._versions[index] = version

    def _after_ray_restart(self, index: int) -> None:
        """An engine Ray started again serves the weights it was built from: give it the
        last checkpoint loaded, or leave it behind for the trainer's next sync; an engine
        never synced (generation from the built weights) is started afresh instead."""
        if self._checkpoint is not None:
            store, rel_dir, version = self._checkpoint
            self._actors[index].load_checkpoint.remote(store, rel_dir, version)
            self._starting[index] = self._actors[index].version.remote()
            self._versions[index] = version
        elif self._synced:
            self._versions[index] = UNKNOWN_VERSION
        else:
            self._restart(index)

    def _close_sync(self, survivors: list) -> None:
        """The sync group lost a member: every side left closes it (NCCL communicators are
        aborted, so nothing waits on the dead engine); it is formed anew at the next sync."""
        sender, self._sender = self._sender, None
        if sender is None:
            return
        sender.close()
        for actor in survivors:
            actor.leave_sync_group.remote()
