"""The body of a vLLM engine actor: one engine, built in the actor's process.

An engine a supervised run names (`alignflow/detached.py`) outlives the host process that
drives it, and Ray starts it again by itself when its process or node is lost, so the
host's replacement finds it running. A restarted engine holds the weights it was built
from, not the ones its driver last sent: it refuses to generate, and any part of a sync
that did not start in its own life (Ray runs the call the dead one was running again on
it), until a whole sync or a checkpoint load has given it weights (`EngineError`: the
caller syncs it and retries).
"""

from __future__ import annotations

from alignflow.errors import EngineError
from alignflow.tasks.engines.base import (
    UNKNOWN_VERSION,
    WAKE_TAGS,
    GeneratedSample,
    SamplingParams,
    WakeTag,
)
from alignflow.tasks.engines.standin import build_engine
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.engines.vllm.weights import WeightBucket
from alignflow.timeline import mark

# UNKNOWN_VERSION (`engines.base`) is also what a restarted or taken-over engine serves


def restarted_by_ray() -> bool:
    """Whether Ray started this actor again after its process or node was lost."""
    import ray

    return bool(ray.get_runtime_context().was_current_actor_reconstructed)


class EngineHost:
    """The actor body: one `VLLMEngine`, built inside the actor's process."""

    def __init__(self, model_path: str, config: VLLMEngineConfig, policy_version: int) -> None:
        self.engine = build_engine(model_path, config, policy_version=policy_version)
        self.stale = restarted_by_ray()  # its weights are not the ones last sent to it
        self.syncing = False  # a whole sync started in this life (drop_staged)
        self.joined = False  # it joined a weight-sync group in this life
        mark("engine up")

    def _usable(self, what: str, in_sync: bool = False) -> None:
        """A restarted engine does nothing its lost state would make wrong: no sample, and
        no part of a sync that did not start in this life (Ray runs the call the dead one
        was running again here)."""
        if self.stale and not (in_sync and self.syncing):
            raise EngineError(f"vLLM engine restarted by Ray after its process or node was "
                              f"lost: {what} waits for a whole weight sync")

    def version(self) -> int:
        return UNKNOWN_VERSION if self.stale else self.engine.policy_version

    def progress(self) -> int:
        """The engine's count of sampled tokens and finished sequences. Answered on the
        actor's own thread (`concurrency_group="progress"`) while a generate runs, so the
        host tells a long generate from a hung engine (`vllm_liveness`)."""
        return self.engine.progress()

    def generate(self, prompts: list[list[int]], params: SamplingParams,
                 prompt_offset: int) -> list[GeneratedSample]:
        self._usable("generate")
        return self.engine.generate(prompts, params, prompt_offset=prompt_offset)

    def stage_bucket(self, names, dtypes, shapes, offsets, buffer) -> None:
        self._usable("a weight bucket", in_sync=True)
        self.engine.stage_bucket(WeightBucket(names, dtypes, shapes, offsets, buffer))

    def drop_staged(self) -> None:
        self.engine.drop_staged()
        self.syncing = True

    def commit_weights(self, version: int | None) -> int:
        self._usable("a weight commit", in_sync=True)  # not half of a sync: all of one
        self.engine.commit_weights(version=version)
        self.stale = False
        return self.engine.policy_version

    def load_checkpoint(self, store, rel_dir: str, version: int | None) -> int:
        self.engine.load_checkpoint(store, rel_dir, version=version)
        self.stale = False
        return self.engine.policy_version

    def sleep(self) -> bool:
        return self.engine.sleep()

    def wake(self, tags: tuple[WakeTag, ...] = WAKE_TAGS) -> bool:
        return self.engine.wake(tags)

    def join_sync_group(self, host: str, port: int, rank: int, world: int, backend: str,
                        timeout_s: float) -> bool:
        self.engine.join_sync_group(host, port, rank, world, backend, timeout_s)
        self.joined = True
        return True

    def receive_bucket(self, names, dtypes, shapes, offsets, nbytes: int) -> None:
        self._usable("a broadcast bucket", in_sync=self.joined)
        self.engine.receive_bucket(names, dtypes, shapes, offsets, nbytes)

    def leave_sync_group(self) -> bool:
        self.engine.leave_sync_group()
        self.joined = False
        return True
