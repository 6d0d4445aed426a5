"""A colocated weight sync sends handles, not bytes (issue 41, item 6; `tasks/engines/vllm/ipc.py`).

On the CPU the same code shares a bucket through a shared-memory file (torch's `file_system`
sharing: the handle is the file's name), as it shares a GPU bucket by CUDA IPC handle:
- what crosses the RPC for one bucket is the handle (< 4 KiB), where the byte mode sends at
  least the bucket; another process maps the handle and reads the bucket's very bytes;
- a sync through the HF stand-in in IPC mode gives bitwise the weights of a byte-mode sync;
- `VLLMEngine`'s sync reaches the worker extension (`alignflow_stage_shared`) by handle
  across a pickling RPC and loads bitwise; one that stops halfway leaves `UNKNOWN_VERSION`,
  and no bucket's shared file outlives the sync (the sender frees each after the answer).
"""

from __future__ import annotations

import copy
import functools
import multiprocessing
import os
import pickle
import types
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch

from alignflow.tasks.engines import standin
from alignflow.tasks.engines.base import UNKNOWN_VERSION
from alignflow.tasks.engines.vllm import ipc
from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.engines.vllm.engine import VLLMEngine
from alignflow.tasks.engines.vllm.weights import empty, pack_buckets
from alignflow.tasks.simulate import node
from tests.fast.test_sync_staging import LayerwiseModel, Worker, reload_api  # noqa: F401

BUCKET = 1 << 20
HANDLE_LIMIT = 4 << 10


def _tensors(n: int = 6, numel: int = 40_000) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {f"model.layers.{i}.mlp.down_proj.weight": torch.randn(numel, generator=g)
            for i in range(n)}


def _one_bucket(alloc) -> object:
    return next(pack_buckets(_tensors().items(), BUCKET, alloc=alloc))


def test_the_rpc_carries_a_handle_not_the_bucket():
    ipc_bucket, bytes_bucket = _one_bucket(ipc.shareable), _one_bucket(empty)
    size = ipc_bucket.buffer.numel()
    assert size == bytes_bucket.buffer.numel() == 6 * 160_000  # six fp32 tensors, aligned
    by_handle = ipc.wire_bytes(ipc.message(ipc_bucket, "ipc"))
    by_bytes = ipc.wire_bytes(ipc.message(bytes_bucket, "bytes"))
    print(f"one {size}-byte bucket: {by_handle} bytes by handle, {by_bytes} by bytes")
    assert by_handle < HANDLE_LIMIT
    assert by_bytes >= size


def _read_in_child(message: bytes) -> bytes:
    _, args = pickle.loads(message)
    return bytes(ipc.opened(args[-1], None).numpy())


def test_another_process_maps_the_bucket_it_was_given_a_handle_to():
    bucket = _one_bucket(ipc.shareable)
    message = pickle.dumps(ipc.message(bucket, "ipc"))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        seen = pool.submit(_read_in_child, message).result()
    assert seen == bytes(bucket.buffer.numpy())


@pytest.fixture
def stand_ins(tiny_model_dir, monkeypatch):
    """Two HF stand-ins of the tiny model, one synced by handle, one by bytes."""
    monkeypatch.setenv(node.ENV_NODE, "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    config = VLLMSection(max_num_seqs=4).engine_config(dtype="fp32", on_gpu=True,
                                                       colocated=True)
    engines = []
    for mode in ("ipc", "bytes"):
        engine = standin.HFStandIn(str(tiny_model_dir), config, policy_version=0)
        engine.sync_mode = mode
        engines.append(engine)
    return engines


def test_a_sync_by_handle_gives_the_weights_of_a_sync_by_bytes(stand_ins):
    by_handle, by_bytes = stand_ins
    g, noise = torch.Generator().manual_seed(7), {}
    new = {}  # random weights; the tied LM head gets the embedding's (one tensor in the model)
    for k, v in by_handle.hf.model.state_dict().items():
        new[k] = noise.setdefault(v.data_ptr(), v + torch.randn(v.shape, generator=g))
    for engine in stand_ins:
        engine.update_weights(new.items(), version=4)
        assert engine.policy_version == 4
    handle_state, bytes_state = by_handle.hf.model.state_dict(), by_bytes.hf.model.state_dict()
    for name, tensor in new.items():
        assert torch.equal(handle_state[name], tensor), name
        assert torch.equal(handle_state[name], bytes_state[name]), name
    size = sum(t.numel() * t.element_size() for t in new.values())  # one bucket: 558 KB
    assert by_handle.last_message_bytes < HANDLE_LIMIT
    assert by_bytes.last_message_bytes >= size


class Shares:
    """`ipc.share`, noting the shared-memory file each bucket lives in."""

    def __init__(self, monkeypatch) -> None:
        self.files: list[str] = []
        real = ipc.share

        def share(buffer):
            handles = real(buffer)
            self.files.append(handles["cpu"][1][1].decode())
            return handles
        monkeypatch.setattr(ipc, "share", share)

    def left(self) -> list[str]:
        return [f for f in self.files if os.path.exists(f"/dev/shm{f}")]


def _stopping(named: dict[str, torch.Tensor], after: int):
    for i, item in enumerate(named.items()):
        if i == after:
            raise RuntimeError("the trainer died mid-sync")
        yield item


def test_a_stand_in_sync_by_handle_that_stops_halfway_serves_no_version(stand_ins,
                                                                         monkeypatch):
    engine = stand_ins[0]
    engine.config = copy.copy(engine.config)
    object.__setattr__(engine.config, "sync_bucket_bytes", 64 << 10)  # several buckets
    shares = Shares(monkeypatch)
    new = {k: v + 1 for k, v in engine.hf.model.state_dict().items()}
    with pytest.raises(RuntimeError, match="died mid-sync"):
        engine.update_weights(_stopping(new, after=len(new) - 2), version=1)
    assert engine.policy_version == UNKNOWN_VERSION
    assert len(shares.files) >= 2 and shares.left() == []
    engine.update_weights(new.items(), version=2)
    assert engine.policy_version == 2 and shares.left() == []


class ProcessLLM:
    """vLLM's `LLM` with its worker in another process (`mp`): `collective_rpc` pickles the
    call as vLLM's message queue does and runs it on the worker extension."""

    def __init__(self, worker: Worker) -> None:
        self.worker, self.sent = worker, []

    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        wire = pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL)
        self.sent.append((method, len(wire)))
        method, args = pickle.loads(wire)
        return [getattr(self.worker, method)(*args)]

    def reset_prefix_cache(self) -> bool:
        return True


def _vllm_engine(source: dict[str, torch.Tensor], mode: ipc.SyncMode):
    params = {n: torch.zeros_like(t) for n, t in source.items()}
    engine = object.__new__(VLLMEngine)
    engine.llm = ProcessLLM(Worker(LayerwiseModel(params)))
    engine.config = types.SimpleNamespace(sync_bucket_bytes=BUCKET)
    engine.sync_mode, engine.pack_device, engine.model_path = mode, torch.device("cpu"), "m"
    engine._shapes = {n: list(t.shape) for n, t in source.items()}
    engine._tied, engine.policy_version, engine._before = False, 0, None
    engine.wake = lambda tags=(): False
    return engine, params


def test_vllm_engine_syncs_its_worker_process_by_handle():
    source = _tensors(n=30)  # 4.8 MB: five buckets
    engine, params = _vllm_engine(source, "ipc")
    engine.update_weights(source.items(), version=3)
    stages = [(m, n) for m, n in engine.llm.sent if m.startswith("alignflow_stage")]
    assert len(stages) == 5 and all(m == ipc.STAGE_SHARED and n < HANDLE_LIMIT
                                    for m, n in stages)
    assert engine.policy_version == 3
    assert all(torch.equal(params[n], t) for n, t in source.items())


def test_vllm_engine_sync_by_handle_that_stops_halfway_serves_no_version(monkeypatch):
    source = _tensors(n=30)
    engine, params = _vllm_engine(source, "ipc")
    shares = Shares(monkeypatch)
    with pytest.raises(RuntimeError, match="died mid-sync"):
        engine.update_weights(_stopping(source, after=20), version=1)
    assert engine.policy_version == UNKNOWN_VERSION
    assert len(shares.files) == 3 and shares.left() == []  # 20 tensors: 3 full buckets sent
    assert torch.equal(params["model.layers.0.mlp.down_proj.weight"],
                       source["model.layers.0.mlp.down_proj.weight"])


def test_a_worker_on_another_device_is_refused_in_one_line():
    handles = ipc.share(_one_bucket(ipc.shareable).buffer)
    with pytest.raises(RuntimeError, match="no handle for this worker's device meta"):
        ipc.opened(handles, torch.device("meta"))


def test_the_mode_follows_where_the_worker_runs():
    assert ipc.mode_for("uni", 1)[0] == "ref"
    assert ipc.mode_for("mp", 1)[0] == "ipc"
    assert ipc.mode_for("mp", 2)[0] == "bytes"
    planned = functools.partial(ipc.planned_mode, tensor_parallel_size=1, transport="nccl")
    assert planned(in_host=True, ranks=2, hybrid=False)[0] == "cuda-ipc"  # per-rank engines
    assert planned(in_host=True, ranks=1, hybrid=False)[0] == "in place"
    assert planned(in_host=False, ranks=8, hybrid=True)[0] == "cuda-ipc"  # 4 x TP2 in the PG
    assert planned(in_host=False, ranks=8, hybrid=True, tensor_parallel_size=2)[0] == "cuda-ipc"
    assert planned(in_host=False, ranks=2, hybrid=False)[0] == "nccl"


def test_a_stand_in_in_a_trainer_rank_is_synced_by_handle(tiny_model_dir, monkeypatch):
    """As `VLLMEngine` there (its worker a process of its own): the per-rank hybrid engines
    of a simulated cluster take their syncs by handle; elsewhere by reference."""
    monkeypatch.setenv(node.ENV_NODE, "0")
    config = VLLMSection(max_num_seqs=4).engine_config(dtype="fp32", on_gpu=False,
                                                       colocated=True)
    modes = []
    for in_group in (True, False):
        monkeypatch.setattr(standin, "in_trainer_group", lambda g=in_group: g)
        modes.append(standin.HFStandIn(str(tiny_model_dir), config).sync_mode)
    assert modes == ["ipc", "ref"]
