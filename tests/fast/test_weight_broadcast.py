"""The weight-sync group (gloo here; NCCL on GPUs): packed buckets broadcast from the
trainer's rank 0 arrive bitwise in another process, beside the process's default group."""

import datetime
import multiprocessing as mp

import pytest
import torch

from alignflow.tasks.engines.vllm_broadcast import SyncGroup
from alignflow.tasks.engines.vllm_config import VLLMSection
from alignflow.tasks.engines.vllm_weights import pack_buckets, unpack


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"a.weight": torch.randn(7, 5, generator=g),
            "b.bias": torch.randn(3, generator=g).to(torch.bfloat16),
            "c.ids": torch.arange(11, dtype=torch.int64)}


def _receiver(port: int, metas: list, out) -> None:
    group = SyncGroup.join("gloo", "127.0.0.1", port, 1, 2, timeout_s=30)
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
        group = SyncGroup("gloo", store, 0, 2, timeout_s=30)
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
        SyncGroup("gloo", store, 0, 2, timeout_s=2)


def test_transport_follows_the_vllm_section():
    assert VLLMSection().transport(on_gpu=True) == "nccl"
    assert VLLMSection().transport(on_gpu=False) == "gloo"  # CPU builds have no NCCL
    assert VLLMSection(sync_backend="gloo").transport(on_gpu=True) == "gloo"
    assert VLLMSection(sync_with_ray=True).transport(on_gpu=True) == "ray"
