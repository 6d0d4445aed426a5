"""The vLLM weight-sync group on real NCCL: `SyncGroup` + packed buckets on cuda.

The trainer's side of `tasks/engines/vllm/broadcast.py` is built as in a run (vLLM's
`StatelessProcessGroup` rendezvous and `PyNcclCommunicator`, issue 21 §3.12), and the tiny
model's weights (fp32, a bf16 copy, int64 ids) are packed by `vllm_weights.pack_buckets`
into cuda buffers, broadcast, unpacked, and the group closed (its communicator aborted, as
at an engine restart). One device holds one NCCL rank, so the group has one member: this
checks the construction, the cuda packing and the close, not a transfer. The group is
vLLM's: without vLLM installed the check says so and passes nothing else.
"""

from __future__ import annotations

import time

from bench.gpu_check.checks.common import CheckFailed, cuda, run, tiny_model_dir

BUCKET_BYTES = 64 * 1024  # small buckets: several broadcasts, tensors split across them


def _tensors(torch) -> dict:
    from alignflow.tasks.modeling.loading import load_causal_lm

    state = load_causal_lm(tiny_model_dir()).state_dict()
    named = {k: v.cuda() for k, v in state.items()}
    named |= {f"bf16.{k}": v.to(torch.bfloat16) for k, v in list(named.items())[:4]}
    named["ids"] = torch.arange(1000, dtype=torch.int64, device="cuda")
    return named


def check(argv: list[str]) -> dict:
    torch = cuda()
    import importlib.util

    from alignflow.tasks.distributed.group import free_port
    from alignflow.tasks.engines.vllm.broadcast import SyncGroup
    from alignflow.tasks.engines.vllm.weights import pack_buckets

    if importlib.util.find_spec("vllm") is None:
        return {"summary": "skipped: vLLM is not installed (the NCCL sync group is vLLM's)"}
    tensors = _tensors(torch)
    sync = SyncGroup("nccl", "127.0.0.1", free_port(), 0, 1, timeout_s=60)
    start = time.perf_counter()
    buckets = list(pack_buckets(tensors.items(), BUCKET_BYTES, device=sync.device))
    wrong, nbytes = [], 0
    off_device = sum(str(b.buffer.device) != sync.device for b in buckets)
    for bucket in buckets:
        sync.broadcast(bucket.buffer)
        nbytes += bucket.buffer.numel()
        wrong += [name for name, t in bucket.unpack()
                  if t.dtype != tensors[name].dtype or not torch.equal(t, tensors[name])]
    torch.cuda.synchronize()
    sync.close()
    seconds = time.perf_counter() - start
    figures = {"tensors": len(tensors), "buckets": len(buckets), "bytes": nbytes,
               "buckets_off_device": off_device,
               "seconds": round(seconds, 4), "ranks": 1,
               "summary": f"{len(tensors)} tensors in {len(buckets)} buckets, "
                          f"{len(wrong)} differ"}
    if wrong or off_device:
        raise CheckFailed(f"{len(wrong)} tensors differ after the round trip ({wrong[:3]}); "
                          f"{off_device} buffers not on {sync.device}", figures)
    return figures


if __name__ == "__main__":
    run(check)
