"""vLLM engines in Ray actors: several engines share a generate call; none may hang it.

`VLLMEngineActor` is a `GenerationEngine` on the caller's side. It starts `num_engines`
Ray actors, each holding one `VLLMEngine` (tensor parallel, if any, stays inside an engine:
the actor asks for `tensor_parallel_size` GPUs; placement groups come with GPU placement).
A generate call splits the prompts into contiguous shards, one per engine, with global
prompt indices, so every sample keeps the seed it would get from one engine.

Every wait has a limit: a generate waits while its engines make progress, one quiet for
`generate_timeout_s` is hung (`vllm_liveness`: a long generate is never cut); syncs, sleep
and wake get that long. An engine whose actor died is started again in the background
(`fleet.py`) and its shard of a generate is sampled on another engine serving the same
weights, so a lost engine costs the run no retry; a hung one, or one that misses a
deadline, is killed and started again, and the call raises `EngineError` (kind "system",
so the flow engine retries the task). A restarted engine reloads the last checkpoint given to
`load_checkpoint`; weights pushed since by `update_weights` are gone, so `policy_version`
drops to what the engines really serve once it is up, and the next sync can see it. In a
supervised run the engines are named after their host's group (`alignflow.detached`): they
outlive the host's process, whose replacement takes them over, and Ray starts a lost one
again by itself (`engine_host.py` says how such an engine refuses work until it has
weights).

Each engine runs in its own placement group (`vllm_placement`). Weights reach the engines
in packed buckets, either through Ray's object store (`transport="ray"`) or broadcast from
this process over a process group made for the sync (`"nccl"` on GPUs, `"gloo"`;
`vllm_broadcast`), which is rebuilt after an engine restarts; hybrid engines, on their
trainer ranks' GPUs, by handle (`vllm_ipc_group`; `actor_send.py` holds the senders). Each engine loads a bucket as
it comes (`vllm_engine_sync`); a sync that fails halfway leaves the engines it reached
serving no version (`UNKNOWN_VERSION`), so they are synced again before they sample.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Iterable

import torch

from alignflow import detached
from alignflow.errors import ConfigError, EngineError
from alignflow.tasks.engines.base import WAKE_TAGS, GeneratedSample, SamplingParams, WakeTag
from alignflow.tasks.engines.vllm import ipc_group, placement
from alignflow.tasks.engines.vllm.actor_send import Senders
from alignflow.tasks.engines.vllm.broadcast import BroadcastSender
from alignflow.tasks.engines.vllm.config import Transport, VLLMEngineConfig
from alignflow.tasks.engines.vllm.engine_host import UNKNOWN_VERSION, EngineHost
from alignflow.tasks.engines.vllm.fleet import EngineFleet


class VLLMEngineActor(EngineFleet, Senders):
    """`num_engines` vLLM engines in Ray actors behind one `GenerationEngine`."""

    def __init__(self, model_path: str, config: VLLMEngineConfig | None = None, *,
                 num_engines: int = 1, num_cpus_per_engine: float | None = None,
                 policy_version: int = 0, transport: Transport = "ray",
                 on_gpu: bool | None = None, hybrid: bool = False) -> None:
        if num_engines < 1:
            raise ConfigError(f"num_engines={num_engines}: expected an integer >= 1")
        self.model_path = str(model_path)
        self.config = config or VLLMEngineConfig()
        self.on_gpu = torch.cuda.is_available() if on_gpu is None else on_gpu
        self.cores = None if self.on_gpu else placement.cpu_core_groups(num_engines)
        self.num_cpus = num_cpus_per_engine or (1.0 if self.on_gpu else placement.CPU_ENGINE_RAY_CPUS)
        self.transport = transport
        self._sender: BroadcastSender | None = None  # the sync group, while all its engines live
        self._checkpoint: tuple | None = None  # (store, rel_dir, version) of the last load
        self._initial_version = policy_version
        self._versions = [policy_version] * num_engines
        self._target = policy_version  # the version last synced or loaded: what is served
        self._starting: dict[int, object] = {}  # restarted engines: index -> readiness ref
        self._restarts: Counter[int] = Counter()  # engine index -> deaths in this host's life
        self._synced = False  # weights were sent since the start (not only the built ones)
        # hybrid: on the trainer ranks' GPUs (`placement.hybrid_slots`), living with them
        self._slots = placement.hybrid_slots(num_engines, self.config.tensor_parallel_size) \
            if hybrid else None
        self._names = None if hybrid else detached.helper_names("engine", num_engines)
        self._groups, self._actors = [], []
        for index in range(num_engines):
            group, actor = self._take_over(index) or self._start(index, policy_version)
            self._groups.append(group)
            self._actors.append(actor)
        self._wait(self._each("version"), self.config.startup_timeout_s, "start",
                   starts=True)

    def _take_over(self, index: int) -> tuple | None:
        """The engine (and its placement group) that the process this one replaces left
        running, in a supervised run's rebuilt group: no start, no model load. What it
        serves is unknown (a step that was never committed, maybe), so it counts as behind
        and is synced before its first generate."""
        if self._names is None:
            return None
        # a live engine answers at once, one Ray is starting again within its start time
        name = self._names[index]
        found = detached.take_over([name], name, timeout=self.config.startup_timeout_s,
                                   method="version")
        if found is None:
            return None
        (actor,), group = found
        actor.leave_sync_group.remote()  # its sender died with the process it served
        self._versions[index] = UNKNOWN_VERSION
        self._synced = True  # what it serves comes from the trainer, not from its build
        return group, actor

    def _start(self, index: int, version: int) -> tuple:
        if self._slots is not None:
            return None, self._spawn(index, version, None)
        group = placement.reserve(self._bundle(), self.config.startup_timeout_s, index,
                                  name=self._name(index))
        return group, self._spawn(index, version, group)

    def _name(self, index: int) -> str | None:
        return self._names[index] if self._names else None

    @property
    def generate_timeout_s(self) -> float:
        return self.config.generate_timeout_s

    def _bundle(self) -> dict[str, float]:
        return placement.engine_bundle(on_gpu=self.on_gpu, cpus=self.num_cpus,
                                       tensor_parallel_size=self.config.tensor_parallel_size)

    def _spawn(self, index: int, version: int, group):
        import ray

        env = None
        if self.cores is not None:
            env = placement.cpu_env(placement.bind_spec(self.cores[index]))
        options = placement.slot_options(self._slots[index]) if self._slots is not None \
            else placement.actor_options(group, self._bundle(), env)
        # `progress` on a thread of its own: answered while a generate runs (named on the
        # method, not per call: Ray Client refuses a call's concurrency group)
        ray.method(concurrency_group="progress")(EngineHost.progress)
        remote = ray.remote(concurrency_groups={"progress": 1})(EngineHost)
        return remote.options(**options, **detached.helper_options(self._name(index))).remote(
            self.model_path, self.config, version)

    # -- calls with a deadline -------------------------------------------------------------
    def _each(self, method: str, *args) -> dict[int, object]:
        """One call per engine, every one (restarts waited for): {engine index: object ref}."""
        self._ready(every=True)
        return self._call(dict(enumerate(self._actors)), method, *args)

    @staticmethod
    def _call(engines: dict[int, object], method: str, *args) -> dict[int, object]:
        return {i: getattr(a, method).remote(*args) for i, a in engines.items()}

    def _place(self, shards: list[int]) -> dict[int, int]:
        """{shard: engine}: each shard on its own engine while that one serves, else on
        one that does (restarts are waited for only when none serves)."""
        serving = self._serving()
        if not serving and self._starting:
            self._ready(every=True)
            serving = self._serving()
        if not serving:
            raise EngineError(f"vLLM generate: no engine serves policy version {self._target} "
                              f"(they serve {self._versions}); they are synced before the retry")
        return {j: j if j in serving else serving[k % len(serving)]
                for k, j in enumerate(shards)}

    # -- GenerationEngine ------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams, *,
                 timeout_s: float | None = None) -> list[GeneratedSample]:
        """Contiguous prompt shards, one per engine; samples in (prompt, sample) order. A
        shard whose engine died is sampled again on one serving the same weights (same
        prompts, offset and seed: the same samples) while the lost one starts again; an
        engine quiet for `timeout_s` (default `generate_timeout_s`: no new token, no
        finished sequence) is hung: restarted, and the call raises `EngineError`."""
        if params.seed is None:  # one seed for all shards, as one engine would draw it
            params = dataclasses.replace(params, seed=random.getrandbits(62))
        timeout = timeout_s or self.generate_timeout_s
        todo = {j: (lo, hi) for j, (lo, hi) in enumerate(_shards(len(prompts), len(self._actors)))
                if hi > lo}
        done: dict[int, list] = {}
        for _ in range(len(self._actors) + 1):  # the last round: on a restarted one
            where = self._place(list(todo))
            calls = {j: self._actors[where[j]].generate.options(max_task_retries=0).remote(
                prompts[lo:hi], params, lo) for j, (lo, hi) in todo.items()}
            answers = self._gather(calls, timeout, "generate", engine_of=where, alive=True)
            done.update(answers.results)
            self._settle({where[j]: why for j, why in answers.failed.items()},
                         [where[j] for j in answers.stale], {where[j] for j in answers.late})
            if answers.late:
                lost = "; ".join(f"engine {where[j]}: {why}" for j, why in answers.failed.items())
                raise EngineError(f"vLLM generate failed ({lost}); restarted them, serving "
                                  f"policy version {self.policy_version}")
            todo = {j: b for j, b in todo.items() if j not in done}
            if not todo:
                return [sample for j in sorted(done) for sample in done[j]]
        raise EngineError(f"vLLM generate: engines kept dying ({len(self._actors) + 1} rounds "
                          "in one call); restarted them")

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]] | ipc_group.Rounds,
                       *, version: int | None = None) -> None:
        """Packs once here; each bucket goes to every engine up once (object store or
        broadcast) and is loaded as it comes, then they commit together; hybrid engines get
        `ipc_group.Rounds` instead (every rank packed and shared its bucket). Engines still
        starting are synced once up (they count as behind)."""
        timeout, live = self.generate_timeout_s, self._live()
        target = self._target + 1 if version is None else version
        live = self._begin_sync(live, timeout)
        try:
            if isinstance(named_tensors, ipc_group.Rounds):  # hybrid: every rank's handles
                self._send_by_handles(named_tensors, timeout, live)
            elif self.transport == "ray":
                self._send_by_ray(named_tensors, timeout, live)
            else:
                self._send_by_broadcast(named_tensors, timeout, live)
            versions = self._wait(self._call(live, "commit_weights", target), timeout, "sync")
        except BaseException:
            self._torn(live)
            raise
        for index, served in zip(live, versions, strict=True):
            self._versions[index] = served
        self._target, self._synced = target, True

    def _torn(self, engines: dict[int, object]) -> None:
        """A sync failed halfway: the engines it reached loaded some buckets, so they serve
        no version until a whole sync (ones restarting meanwhile keep what they load)."""
        for index in engines:
            if index not in self._starting:
                self._versions[index] = UNKNOWN_VERSION

    def _begin_sync(self, live: dict[int, object], timeout: float) -> dict[int, object]:
        """Every engine up drops what a broken sync left staged; the ones lost since their
        last call are starting again (synced once up) and the sync goes on without them,
        as no weight has been read yet. Raises `EngineError` when none is left."""
        answers = self._gather(self._call(live, "drop_staged"), timeout, "sync")
        self._settle(answers.failed, answers.stale, answers.late)
        kept = {i: a for i, a in live.items() if i in answers.results}
        if answers.late or not kept:
            lost = "; ".join(f"engine {i}: {why}" for i, why in answers.failed.items())
            raise EngineError(f"vLLM sync could not start ({lost}); restarted them, serving "
                              f"policy version {self.policy_version}")
        return kept

    def load_checkpoint(self, store, rel_dir: str, *, version: int | None = None) -> None:
        """Every engine reads the checkpoint from the store itself (bucket by bucket: one
        that fails halfway serves no version)."""
        target = self._target + 1 if version is None else version
        calls = self._each("load_checkpoint", store, rel_dir, target)
        try:
            self._versions = self._wait(calls, self.generate_timeout_s, "load_checkpoint")
        except BaseException:
            self._torn(dict(enumerate(self._actors)))
            raise
        self._checkpoint, self._target = (store, rel_dir, target), target

    def sleep(self) -> bool:
        return all(self._wait(self._each("sleep"), self.generate_timeout_s, "sleep"))

    def wake(self, tags: tuple[WakeTag, ...] = WAKE_TAGS) -> bool:
        """Engines wake themselves in two stages (a sync the weights, generate the KV
        cache); this wakes `tags` on every engine now."""
        return all(self._wait(self._each("wake", tags), self.generate_timeout_s, "wake"))

    def shutdown(self) -> None:
        import ray

        if not ray.is_initialized():  # Ray went first; its actors went with it
            return
        if self._sender is not None:
            self._sender.close()
        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        self._actors, self._sender = [], None
        placement.release(self._groups)
        self._groups = []


def _shards(n: int, parts: int) -> list[tuple[int, int]]:
    """`parts` contiguous [lo, hi) ranges covering range(n), sizes differing by at most 1."""
    base, extra = divmod(n, parts)
    bounds, lo = [], 0
    for i in range(parts):
        hi = lo + base + int(i < extra)
        bounds.append((lo, hi))
        lo = hi
    return bounds
