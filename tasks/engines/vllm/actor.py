"""vLLM engines in Ray actors: several engines share a generate call; none may hang it.

`VLLMEngineActor` is a `GenerationEngine` on the caller's side. It starts `num_engines`
Ray actors, each holding one `VLLMEngine` (tensor parallel, if any, stays inside an engine:
the actor asks for `tensor_parallel_size` GPUs; placement groups come with GPU placement).
A generate call splits the prompts into contiguous shards, one per engine, with global
prompt indices, so every sample keeps the seed it would get from one engine.

Every wait has a limit (`generate_timeout_s`). An engine that misses it, or whose actor
died, is killed and started again, and the call raises `EngineError` (kind "system", so the
flow engine retries the task). A restarted engine reloads the last checkpoint given to
`load_checkpoint`; weights pushed since by `update_weights` are gone, so `policy_version`
drops to what the engines really serve and the next sync can see it. In a supervised
run the engines are named after their host's group (`alignflow.detached`): they outlive
the host's process, whose replacement takes them over, and Ray starts a lost one again by
itself (`engine_host.py` says how such an engine refuses work until it has weights).

Each engine runs in its own placement group (`vllm_placement`). Weights reach the engines
in packed buckets, either through Ray's object store (`transport="ray"`) or broadcast from
this process over a process group made for the sync (`"nccl"` on GPUs, `"gloo"`;
`vllm_broadcast`), which is rebuilt after an engine restarts.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable

import torch

from alignflow import detached
from alignflow.errors import ConfigError, EngineError
from alignflow.tasks.engines.base import GeneratedSample, SamplingParams
from alignflow.tasks.engines.vllm import placement
from alignflow.tasks.engines.vllm.broadcast import BroadcastSender
from alignflow.tasks.engines.vllm.config import Transport, VLLMEngineConfig
from alignflow.tasks.engines.vllm.engine_host import UNKNOWN_VERSION, EngineHost
from alignflow.tasks.engines.vllm.weights import pack_buckets


class VLLMEngineActor:
    """`num_engines` vLLM engines in Ray actors behind one `GenerationEngine`."""

    def __init__(self, model_path: str, config: VLLMEngineConfig | None = None, *,
                 num_engines: int = 1, num_cpus_per_engine: float | None = None,
                 policy_version: int = 0, transport: Transport = "ray",
                 on_gpu: bool | None = None) -> None:
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
        self._starting: dict[int, object] = {}  # restarted engines: index -> readiness ref
        self._synced = False  # weights were sent since the start (not only the built ones)
        self._names = detached.helper_names("engine", num_engines)  # named: they outlive us
        self._groups, self._actors = [], []
        for index in range(num_engines):
            group, actor = self._take_over(index) or self._start(index, policy_version)
            self._groups.append(group)
            self._actors.append(actor)
        self._wait(self._each("version"), self.config.startup_timeout_s, "start")

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
        group = placement.reserve(self._bundle(), self.config.startup_timeout_s, index,
                                  name=self._name(index))
        return group, self._spawn(index, version, group)

    def _name(self, index: int) -> str | None:
        return self._names[index] if self._names else None

    @property
    def policy_version(self) -> int:
        """The version every engine serves (the oldest one after a restart)."""
        return min(self._versions)

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
        options = placement.actor_options(group, self._bundle(), env)
        return ray.remote(EngineHost).options(**options,
                                              **detached.helper_options(self._name(index))).remote(
            self.model_path, self.config, version)

    # -- calls with a deadline -------------------------------------------------------------
    def _each(self, method: str, *args) -> dict[int, object]:
        """One call per engine: {engine index: object ref}."""
        self._ready()
        return {i: getattr(a, method).remote(*args) for i, a in enumerate(self._actors)}

    def _ready(self) -> None:
        """Restarted engines get their start-up time before the next call (a start can take
        longer than a generate deadline)."""
        if self._starting:
            starting, self._starting = self._starting, {}
            self._wait(starting, self.config.startup_timeout_s, "restart")

    def _wait(self, calls: dict[int, object], timeout_s: float, what: str) -> list:
        """Results of one call per engine, in engine order. Engines that miss the deadline
        or whose actor died are restarted, then the call raises `EngineError`."""
        import ray
        from ray import exceptions as rex

        ready = placement.wait_said(list(calls.values()), timeout_s,
                                    lambda n: f"vLLM {what}: {n} of {len(calls)} engines "
                                              "answered")
        done = {r.hex() for r in ready}
        failed: dict[int, str] = {}
        stale: list[int] = []  # restarted by Ray (`engine_host.py`): sync them first
        results = []
        for index, ref in calls.items():
            if ref.hex() not in done:
                failed[index] = f"no answer within {timeout_s:g}s"
                continue
            try:
                results.append(ray.get(ref))
            except (rex.RayActorError, rex.WorkerCrashedError) as exc:
                failed[index] = f"actor died ({type(exc).__name__})"
            except EngineError:
                stale.append(index)
        if stale:
            self._close_sync(survivors=self._actors)
            for index in stale:
                self._after_ray_restart(index)
        if stale and not failed:
            raise EngineError(f"vLLM {what}: engines {sorted(stale)} were restarted by Ray "
                              "and serve unknown weights; they are synced before the retry")
        if failed:
            for index in failed:
                self._restart(index)
            engines = "; ".join(f"engine {i}: {why}" for i, why in failed.items())
            raise EngineError(f"vLLM {what} failed on {len(failed)} of {len(calls)} engines "
                              f"({engines}); restarted them, serving policy version "
                              f"{self.policy_version}")
        return results

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

    # -- GenerationEngine ------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: SamplingParams, *,
                 timeout_s: float | None = None) -> list[GeneratedSample]:
        """Contiguous prompt shards, one per engine; samples in (prompt, sample) order."""
        if params.seed is None:  # one seed for all shards, as one engine would draw it
            params = dataclasses.replace(params, seed=random.getrandbits(62))
        bounds = _shards(len(prompts), len(self._actors))
        self._ready()
        calls = {i: self._actors[i].generate.remote(prompts[lo:hi], params, lo)
                 for i, (lo, hi) in enumerate(bounds) if hi > lo}
        shards = self._wait(calls, timeout_s or self.generate_timeout_s, "generate")
        return [sample for shard in shards for sample in shard]

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], *,
                       version: int | None = None) -> None:
        """Packs once here; each bucket goes to every engine once (object store or
        broadcast), then all engines load the staged weights together."""
        timeout = self.generate_timeout_s
        self._wait(self._each("drop_staged"), timeout, "sync")
        if self.transport == "ray":
            self._send_by_ray(named_tensors, timeout)
        else:
            self._send_by_broadcast(named_tensors, timeout)
        target = self.policy_version + 1 if version is None else version
        self._versions = self._wait(self._each("commit_weights", target), timeout, "sync")
        self._synced = True

    def _send_by_ray(self, named_tensors, timeout: float) -> None:
        import ray

        for bucket in pack_buckets(named_tensors, self.config.sync_bucket_bytes):
            args = [ray.put(a) for a in bucket.as_args()]
            self._wait(self._each("stage_bucket", *args), timeout, "sync")

    def _send_by_broadcast(self, named_tensors, timeout: float) -> None:
        if self._sender is None:
            sender = BroadcastSender(self.transport, timeout_s=timeout)
            sender.connect(self._actors, self._wait, self.config.tensor_parallel_size)
            self._sender = sender
        try:
            for bucket in pack_buckets(named_tensors, self.config.sync_bucket_bytes,
                                       device=self._sender.group.device):
                self._sender.send(bucket, self._actors, self._wait)
        except BaseException:
            self._close_sync(survivors=self._actors)
            raise

    def load_checkpoint(self, store, rel_dir: str, *, version: int | None = None) -> None:
        """Every engine reads the checkpoint from the store itself."""
        target = self.policy_version + 1 if version is None else version
        self._versions = self._wait(self._each("load_checkpoint", store, rel_dir, target),
                                    self.generate_timeout_s, "load_checkpoint")
        self._checkpoint = (store, rel_dir, target)

    def sleep(self) -> bool:
        return all(self._wait(self._each("sleep"), self.generate_timeout_s, "sleep"))

    def wake(self) -> bool:
        return all(self._wait(self._each("wake"), self.generate_timeout_s, "wake"))

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
