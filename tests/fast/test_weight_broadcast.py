"""The weight-sync group (gloo here; NCCL on GPUs): packed buckets broadcast from the
trainer's rank 0 arrive bitwise in another process, beside the process's default group."""

import datetime
import multiprocessing as mp
import sys
import types

import pytest
import torch

from alignflow.errors import EngineError
from alignflow.tasks.engines.vllm.broadcast import SyncGroup
from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.engines.vllm.weights import pack_buckets, unpack


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"a.weight": torch.randn(7, 5, generator=g),
            "b.bias": torch.randn(3, generator=g).to(torch.bfloat16),
            "c.ids": torch.arange(11, dtype=torch.int64)}


def _receiver(port: int, metas: list, out) -> None:
    group = SyncGroup("gloo", "127.0.0.1", port, 1, 2, timeout_s=30)
    got = {}
    for names, dtypes, shapes, offsets, nbytes in metas:
        buffer = torch.empty(nbytes, dtype=torch.uint8)
        group.broadcast(buffer)
        got |= {n: t.clone() for n, t in unpack(names, dtypes, shapes, offsets, buffer)}
    out.put({n: (t.dtype, t.tolist()) for n, t in got.items()})


def test_buckets_broadcast_over_gloo_arrive_bitwise():
    import torch.distributed as dist

    buckets = list(pack_buckets(_tensors().items(), bucket_bytes=128))
    assert len(buckets) >= 2  # small buckets: several broadcasts
    metas = [(b.names, b.dtypes, b.shapes, b.offsets, int(b.buffer.numel())) for b in buckets]
    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=30))
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_receiver, args=(store.port, metas, out))
    proc.start()
    try:
        group = SyncGroup("gloo", "127.0.0.1", store.port, 0, 2, timeout_s=30, store=store)
        for bucket in buckets:
            group.broadcast(bucket.buffer)
        got = out.get(timeout=60)
    finally:
        proc.join(timeout=30)
    assert proc.exitcode == 0
    for name, tensor in _tensors().items():
        assert got[name] == (tensor.dtype, tensor.tolist()), name


def test_a_missing_peer_fails_within_the_timeout():
    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, 2, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=2))
    with pytest.raises(Exception):  # noqa: B017 (torch raises its own DistError kinds)
        SyncGroup("gloo", "127.0.0.1", store.port, 0, 2, timeout_s=2, store=store)


def test_transport_follows_the_vllm_section():
    assert VLLMSection().transport(on_gpu=True) == "nccl"
    assert VLLMSection().transport(on_gpu=False) == "gloo"  # CPU builds have no NCCL
    assert VLLMSection(sync_backend="gloo").transport(on_gpu=True) == "gloo"
    assert VLLMSection(sync_with_ray=True).transport(on_gpu=True) == "ray"


class Communicator:
    """Stands for vLLM's PyNcclCommunicator (no GPU here)."""

    def __init__(self) -> None:
        self.calls: list = []

    def broadcast(self, tensor, src):
        self.calls.append(("broadcast", src))

    def destroy(self):
        self.calls.append(("destroy",))


def test_the_nccl_group_is_vllms_stateless_one_and_closing_it_aborts_it(monkeypatch):
    """Issue 21 §3.12: vLLM's StatelessProcessGroup + PyNcclCommunicator, not a raw
    ProcessGroupNCCL; `close` aborts the communicator (a restart leaves nothing waiting)."""
    made: list = []
    comm = Communicator()
    module = types.ModuleType("vllm.distributed.weight_transfer.nccl_common")

    def stateless_init_process_group(master_address, master_port, rank, world_size, device):
        made.append((master_address, master_port, rank, world_size, device))
        return comm
    module.stateless_init_process_group = stateless_init_process_group
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    group = SyncGroup("nccl", "10.0.0.1", 4321, 3, 5, timeout_s=1)
    group.broadcast(torch.zeros(4))
    group.close()
    assert made == [("10.0.0.1", 4321, 3, 5, 2)]
    assert comm.calls == [("broadcast", 0), ("destroy",)]
    with pytest.raises(EngineError, match="closed"):
        group.broadcast(torch.zeros(4))


def test_an_engine_restart_closes_the_sync_group_on_every_side(monkeypatch):
    import ray

    from alignflow.tasks.engines.vllm.actor import VLLMEngineActor

    class Actor:
        def __init__(self) -> None:
            self.left = 0
            self.leave_sync_group = types.SimpleNamespace(remote=self._leave)
            self.version = types.SimpleNamespace(remote=lambda: "ref")

        def _leave(self):
            self.left += 1

    class Sender:
        closed = 0

        def close(self):
            Sender.closed += 1

    engines = object.__new__(VLLMEngineActor)
    survivor, dead, fresh = Actor(), Actor(), Actor()
    engines.__dict__.update(_actors=[survivor, dead], _sender=Sender(), _checkpoint=None,
                            _initial_version=0, _starting={}, _versions=[0, 0], _names=None,
                            _groups=[None, None])
    monkeypatch.setattr(ray, "kill", lambda actor, no_restart: None)
    monkeypatch.setattr(VLLMEngineActor, "_spawn", lambda self, index, version, group: fresh)
    engines._restart(1)
    assert Sender.closed == 1 and engines._sender is None
    assert survivor.left == 1 and dead.left == 0 and engines._actors == [survivor, fresh]


def test_an_engine_ray_restarted_is_given_weights_by_what_it_served(monkeypatch):
    """`_after_ray_restart`: the last checkpoint loaded again; else behind the trainer's
    next sync when it was synced; else (built weights only) started afresh."""
    from alignflow.tasks.engines.vllm.actor import VLLMEngineActor
    from alignflow.tasks.engines.vllm.engine_host import UNKNOWN_VERSION

    class Call:
        def __init__(self, log, name):
            self.log, self.name = log, name

        def remote(self, *args):
            self.log.append((self.name, args))
            return f"ref-{self.name}"

    class Actor:
        def __init__(self):
            self.log = []
            self.load_checkpoint, self.version = Call(self.log, "load"), Call(self.log, "version")

    restarted = []
    monkeypatch.setattr(VLLMEngineActor, "_restart", lambda self, i: restarted.append(i))
    for checkpoint, synced, expect in ((("store", "ck", 3), True, 3),
                                       (None, True, UNKNOWN_VERSION), (None, False, 0)):
        engines = object.__new__(VLLMEngineActor)
        actor = Actor()
        engines.__dict__.update(_actors=[actor], _checkpoint=checkpoint, _synced=synced,
                                _starting={}, _versions=[0])
        engines._after_ray_restart(0)
        assert engines._versions == [expect]
        assert actor.log == ([("load", ("store", "ck", 3)), ("version", ())] if checkpoint
                             else [])
    assert restarted == [0]  # only the engine that never had weights sent
