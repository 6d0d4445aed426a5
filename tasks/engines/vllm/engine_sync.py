"""A vLLM engine's weight sync, bucket by bucket: mixed into `VLLMEngine`.

Each bucket is loaded into the model as it comes (`vllm_worker`: one layerwise reload from
the sync's first bucket to its commit), so a sync's extra memory on an engine GPU is one
bucket and the tensors of a layer still waiting for its others, not a staged copy of the
model: a 7B bf16 model (15.2 GB) staged whole does not fit beside an engine that took 95%
of its GPU, and every tensor-parallel rank staged it unsharded.

Staging everything first kept a sync atomic: one that stopped halfway (a dead trainer, a
failed broadcast, a name the model lacks) changed nothing. Loading as it comes keeps the
guarantee another way: from the first bucket to the commit the engine serves
`UNKNOWN_VERSION`, and a sync that does not reach its commit leaves it there. Generate
refuses under it (`VLLMEngine.generate`), and the engine is behind every version its
caller serves, so the caller syncs it again before it samples (the host's check before
each generate, `EngineFleet` for engines in actors). Re-syncing costs one more sync after a
failure, which is rare; staging cost the model's size on every sync.

How a bucket reaches the workers follows where they run (`sync_mode`, `vllm_ipc`): by
reference to a worker in this process, by handle (CUDA IPC, shared memory on the CPU) to
one in another process on this device (a hybrid engine in a trainer rank), else pickled.

The sync wakes the weights alone (`wake(("weights",))`): the KV cache stays freed until
generate wakes it, so the sync's peak is the weights and a bucket, not also the KV cache.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from alignflow.errors import ConfigError, SchemaError
from alignflow.tasks.engines.base import UNKNOWN_VERSION
from alignflow.tasks.engines.vllm import ipc
from alignflow.tasks.engines.vllm.weights import WeightBucket, empty, pack_buckets


class WeightSync:
    """Mixed into `VLLMEngine` (its `llm`, `config`, `pack_device`, `model_path`,
    `_shapes`, `_tied`, `policy_version`, `_before` and `wake`)."""

    sync_mode: ipc.SyncMode = "ref"  # how buckets reach the workers (`VLLMEngine` sets it)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]], *,
                       version: int | None = None) -> None:
        """Sends the tensors (HF `state_dict` names) in packed buckets, each loaded as it
        comes, then commits. One that fails halfway leaves `UNKNOWN_VERSION`."""
        self.drop_staged()
        alloc = ipc.shareable if self.sync_mode == "ipc" else empty
        try:
            for bucket in pack_buckets(self._checked(named_tensors), self.config.sync_bucket_bytes,
                                       device=self.pack_device, alloc=alloc):
                self.stage_bucket(bucket)
                del bucket  # once every worker answered: one bucket at a time
                ipc.collect(self.sync_mode, self.pack_device)
        except BaseException:
            self.drop_staged()
            raise
        self.commit_weights(version=version)

    def drop_staged(self) -> None:
        """Ends a sync that did not finish: the model runs again with the buckets loaded so
        far, and the engine serves no version (`UNKNOWN_VERSION`) until a whole sync."""
        self.llm.collective_rpc("alignflow_drop_staged")
        self._before = None

    def stage_bucket(self, bucket: WeightBucket) -> None:
        """Hands one bucket to every worker, which loads it now (by reference, handle or
        bytes: `sync_mode`); returns once all of them have, so the caller may free it."""
        self._begin_sync()
        method, args = ipc.message(bucket, self.sync_mode)
        self.llm.collective_rpc(method, args=args)

    def _begin_sync(self) -> None:
        """The sync's first bucket: the weights woken (the KV cache stays asleep), and the
        engine serves no version until the commit."""
        if self._before is None:
            self.wake(("weights",))
            self._before, self.policy_version = self.policy_version, UNKNOWN_VERSION

    def commit_weights(self, *, version: int | None = None) -> None:
        """Ends the sync (the backend's weight processing runs) and forgets KV computed
        with the old weights; the engine serves `version` again."""
        self.llm.collective_rpc("alignflow_commit_weights")
        self.llm.reset_prefix_cache()
        before = self.policy_version if self._before is None else self._before
        self._before = None
        self.policy_version = before + 1 if version is None else version

    def _checked(self, named_tensors: Iterable[tuple[str, torch.Tensor]]
                 ) -> Iterator[tuple[str, torch.Tensor]]:
        """Refuses names and shapes the model folder's checkpoint does not have, before the
        tensor is sent (a refusal mid-sync leaves `UNKNOWN_VERSION`: synced again); drops a
        tied LM head, which vLLM shares with the embedding."""
        for name, tensor in named_tensors:
            expected = self._shapes.get(name)
            if expected is None and self._tied and name == "lm_head.weight":
                continue
            if expected is None:
                raise ConfigError(f"update_weights: unknown tensor {name!r}; expected a name "
                                  f"of the safetensors in {self.model_path}")
            if list(tensor.shape) != expected:
                raise ConfigError(f"update_weights: {name!r} has shape {tuple(tensor.shape)}; "
                                  f"expected {tuple(expected)}")
            yield name, tensor

    def load_checkpoint(self, store, rel_dir: str, *, version: int | None = None) -> None:
        """Loads the weights of a checkpoint committed with `artifacts.checkpoints.save`
        (its `model.safetensors` only, streamed tensor by tensor into buckets)."""
        with model_file(store, rel_dir) as path:
            self.update_weights(safetensors_items(path), version=version)

    def join_sync_group(self, host: str, port: int, first_rank: int, world: int, backend: str,
                        timeout_s: float) -> None:
        """Every worker joins the trainer's weight-sync group (`vllm_broadcast`)."""
        self.llm.collective_rpc("alignflow_join_group",
                                args=(host, port, first_rank, world, backend, timeout_s))

    def leave_sync_group(self) -> None:
        """Every worker closes its side of the weight-sync group (an engine restarted)."""
        self.llm.collective_rpc("alignflow_leave_group")

    def receive_bucket(self, names: list[str], dtypes: list[str], shapes: list[list[int]],
                       offsets: list[int], nbytes: int) -> None:
        """Every worker receives one broadcast bucket and loads it (see `stage_bucket`)."""
        self._begin_sync()
        self.llm.collective_rpc("alignflow_receive_bucket",
                                args=(names, dtypes, shapes, offsets, nbytes))


@contextlib.contextmanager
def model_file(store, rel_dir: str) -> Iterator[str]:
    """A local path of the checkpoint's model.safetensors (downloaded if the store is remote)."""
    if not store.exists(f"{rel_dir}/meta.json"):
        raise SchemaError(f"{store.url}/{rel_dir}: no meta.json; not a checkpoint or an "
                          "unfinished save")
    rel = f"{rel_dir}/model.safetensors"
    if store.is_local:
        yield store.readable_path(rel)  # a regular file reached through no link
        return
    with tempfile.TemporaryDirectory(prefix="alignflow-vllm-") as tmp:
        local = os.path.join(tmp, "model.safetensors")
        store.get_file(rel, local)
        yield local


def checkpoint_shapes(folder: str) -> dict[str, list[int]]:
    """Tensor name -> shape over the folder's safetensors files (headers only)."""
    from safetensors import safe_open

    shapes: dict[str, list[int]] = {}
    for path in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                shapes[name] = list(f.get_slice(name).get_shape())
    return shapes


def safetensors_items(path: str) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
            yield name, f.get_tensor(name)
