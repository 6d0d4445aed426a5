"""What a weight sync ships (issue 21 §3.10): tensors in the engine's dtype (a bf16 engine
gets bf16: half the bytes of fp32 masters), packed on the GPU when the engine's worker
runs in the trainer's process (no GPU → host → GPU trip), on the CPU when it is another
process; fp32 runs ship exactly what they shipped before."""

from __future__ import annotations

import types

import torch

from alignflow.tasks.engines.vllm import process as vllm_process
from alignflow.tasks.steps.host_engine import EngineSide, in_dtype


class Recorder:
    policy_version = 0

    def update_weights(self, named, *, version=None):
        self.got = dict(named)


def _host(dtype: str) -> EngineSide:
    host = object.__new__(EngineSide)
    trainer = types.SimpleNamespace(state_dict_for_sync=lambda: iter(
        [("w", torch.ones(4, 4)), ("ids", torch.arange(3))]))
    host.__dict__.update(actor=trainer, engine=Recorder(), policy_version=1,
                         spec=types.SimpleNamespace(dtype=dtype))
    return host


def test_a_bf16_engine_is_sent_bf16(monkeypatch):
    monkeypatch.setattr(type(_host("bf16")), "drives_engine", property(lambda self: True))
    host = _host("bf16")
    host.sync_engine()
    got = host.engine.got
    assert got["w"].dtype == torch.bfloat16 and got["ids"].dtype == torch.int64
    assert got["w"].nbytes == 16 * 2


def test_fp32_ships_the_same_tensors_as_before():
    w = torch.randn(3, 3)
    ((_, out),) = list(in_dtype([("w", w)], torch.float32))
    assert out is w  # no copy, same bits


def test_buckets_are_packed_where_the_worker_reads_them(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert vllm_process.pack_device(True, "uni") == torch.device("cuda", 3)
    assert vllm_process.pack_device(True, "mp") == torch.device("cpu")
    assert vllm_process.pack_device(False, "uni") == torch.device("cpu")
