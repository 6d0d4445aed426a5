"""A hybrid engine's weight sync on one GPU: by CUDA IPC handle against pickled bytes (issue 41,
item 6: "colocated syncs pass CUDA IPC handles").

This process is the trainer; a second process on the same GPU is the engine's worker, as
vLLM's `mp` worker of a per-rank hybrid engine is: the vLLM worker extension
(`worker.AlignflowWorkerExtension`) over the fake layerwise model of
tests/fast/test_sync_staging.py, with weights and a KV cache on the GPU. The engine sleeps
(KV freed, weights offloaded, as vLLM's level 1), then `engine_sync.WeightSync.update_weights`
syncs it through a pipe that carries what `collective_rpc` would (pickled): the sync wakes the
weights alone, loads bucket by bucket, commits; generate's wake (the KV cache) comes after.
Twice: `ipc` (buckets packed on the GPU, a handle per bucket, `tasks/engines/vllm/ipc.py`) and
`bytes` (packed on the CPU, the bucket pickled). Figures per mode: seconds, the largest
message, the extra peak on the GPU of each process (torch's `max_memory_allocated` above
its base), whether the KV cache was awake during the sync. Fails when weights differ, when a
handle message is >= 4 KiB, or when the IPC sync's extra (both processes) passes one bucket +
the largest tensor. Llama-2-7B's widths with 8 of its 32 layers (3.6 GB bf16); `cpu` (or no
CUDA): the same at 1/32 of each width on the CPU (shared-memory handles; no peak figures).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import time
import types
from collections.abc import Iterator

from bench.gpu_check.checks.common import CheckFailed, run
from bench.gpu_check.checks.sync_staging import BF16, MIB, bound, llama_shapes, vllm_reload_api

GPU_DIMS = (4096, 11008, 32000, 8)
CPU_DIMS = (128, 344, 1000, 4)
KV_BYTES = 2 << 30  # the engine's KV cache on the GPU (freed while it sleeps)
HANDLE_LIMIT = 4 << 10


def _digest(torch, tensors: dict) -> dict[str, tuple[int, int]]:
    """Per tensor, two integer sums of its raw bits: equal weights give equal digests."""
    out = {}
    for name, t in tensors.items():
        bits = t.contiguous().view(torch.int16).to(torch.int64)
        out[name] = (int(bits.sum()), int((bits * bits).sum()))
    return out


class EngineWorker:
    """The engine's process: the worker extension over the layerwise model, plus sleep, the
    two-stage wake and memory figures (called by name, as `collective_rpc` calls)."""

    def __init__(self, torch, dims: tuple, device) -> None:
        self.torch, self.dev, self.dims = torch, device, dims
        self.reset()

    def reset(self) -> None:
        """A fresh engine: zero weights, KV cache awake."""
        from tests.fast.test_sync_staging import LayerwiseModel, Worker

        torch, device, dims = self.torch, self.dev, self.dims
        self.params, self.kv = None, None
        self.params = {n: torch.zeros(s, dtype=torch.bfloat16, device=device)
                       for n, s in llama_shapes(*dims).items()}
        self.worker = Worker(LayerwiseModel(self.params))
        self.worker.device = device
        self.kv = self._kv()
        self.kv_awake_in_sync = False

    def _kv(self):
        on_gpu = self.dev.type == "cuda"
        return self.torch.empty(KV_BYTES if on_gpu else 1 << 20, dtype=self.torch.uint8,
                                device=self.dev)

    def sleep(self) -> None:
        self.kv = None
        for name, t in self.params.items():
            self.params[name] = t.to("cpu")

    def wake(self, tags: tuple) -> None:
        if "weights" in tags:
            for name, t in self.params.items():
                self.params[name] = t.to(self.dev)
        if "kv_cache" in tags and self.kv is None:
            self.kv = self._kv()

    def peak_start(self) -> int:
        """After the weights' wake, before the sync's first bucket."""
        self.kv_awake_in_sync = self.kv is not None
        if self.dev.type != "cuda":
            return 0
        self.torch.cuda.synchronize()
        self.torch.cuda.reset_peak_memory_stats()
        self.base = self.torch.cuda.memory_allocated()
        return self.base

    def peak_end(self) -> dict:
        self.kv_awake_in_sync |= self.kv is not None
        extra = None
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()
            extra = self.torch.cuda.max_memory_allocated() - self.base
        return {"extra": extra, "kv_awake_in_sync": self.kv_awake_in_sync}

    def digest(self) -> dict:
        return _digest(self.torch, self.params)

    def call(self, method: str, args: tuple):
        target = self if hasattr(self, method) else self.worker
        return getattr(target, method)(*args)


def _engine_main(conn, dims: tuple, device: str) -> None:
    import torch

    engine = EngineWorker(torch, dims, torch.device(device))
    with vllm_reload_api():
        while True:
            method, args = pickle.loads(conn.recv_bytes())
            if method == "exit":
                return
            try:
                conn.send(("ok", engine.call(method, args)))
            except BaseException as exc:  # the trainer reports it
                conn.send(("error", repr(exc)))


class PipeLLM:
    """`LLM.collective_rpc` to the engine's process: the call pickled, its answer awaited."""

    def __init__(self, conn) -> None:
        self.conn, self.largest = conn, 0

    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        wire = pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL)
        if method.startswith("alignflow_stage"):
            self.largest = max(self.largest, len(wire))
        self.conn.send_bytes(wire)
        status, value = self.conn.recv()
        if status != "ok":
            raise RuntimeError(f"engine process: {method}: {value}")
        return [value]

    def reset_prefix_cache(self) -> bool:
        return True


def _trainer_engine(llm: PipeLLM, shapes: dict, mode: str, device, bucket: int):
    """`VLLMEngine`'s sync over the pipe (its wake goes to the engine's process)."""
    from alignflow.tasks.engines.vllm.engine_sync import WeightSync

    class Engine(WeightSync):
        def wake(self, tags=()) -> bool:
            llm.collective_rpc("wake", (tuple(tags),))
            return True

    engine = Engine()
    engine.llm, engine.sync_mode = llm, mode
    engine.config = types.SimpleNamespace(sync_bucket_bytes=bucket)
    engine.pack_device = device if mode == "ipc" else "cpu"
    engine.model_path, engine._tied = "random weights", False
    engine._shapes = {n: list(s) for n, s in shapes.items()}
    engine.policy_version, engine._before = 0, None
    return engine


@contextlib.contextmanager
def engine_process(dims: tuple, device) -> Iterator[PipeLLM]:
    """The engine's worker in a process of its own on `device`, driven over a pipe."""
    context = multiprocessing.get_context("spawn")
    here, there = context.Pipe()
    child = context.Process(target=_engine_main, args=(there, dims, str(device)), daemon=True)
    child.start()
    try:
        yield PipeLLM(here)
    finally:
        here.send_bytes(pickle.dumps(("exit", ())))
        child.join(timeout=60)


def sync_once(torch, llm: PipeLLM, source: dict, device, mode: str, bucket: int) -> dict:
    """One sync of `source` into the (reset, then sleeping) engine; its figures."""
    llm.collective_rpc("reset")
    llm.largest = 0
    engine = _trainer_engine(llm, llm_shapes(source), mode, device, bucket)
    llm.collective_rpc("sleep")
    llm.collective_rpc("wake", (("weights",),))  # the sync's own wake, measured apart
    llm.collective_rpc("peak_start")
    base = _trainer_peak_start(torch, device)
    start = time.perf_counter()
    engine.update_weights(source.items(), version=1)
    seconds = time.perf_counter() - start
    trainer_extra = _trainer_peak_end(torch, device, base)
    engine_side = llm.collective_rpc("peak_end")[0]
    llm.collective_rpc("wake", (("kv_cache",),))
    same = llm.collective_rpc("digest")[0] == _digest(torch, source)
    return {"seconds": round(seconds, 3), "largest_message_bytes": llm.largest,
            "trainer_extra_mib": _mib(trainer_extra), "engine_extra_mib": _mib(engine_side["extra"]),
            "kv_awake_in_sync": engine_side["kv_awake_in_sync"], "weights_equal": same,
            "version": engine.policy_version, "_extra": _sum(trainer_extra, engine_side["extra"])}


def llm_shapes(source: dict) -> dict:
    return {n: tuple(t.shape) for n, t in source.items()}


def _trainer_peak_start(torch, device) -> int:
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def _trainer_peak_end(torch, device, base: int) -> int | None:
    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def _mib(n: int | None) -> float | None:
    return None if n is None else round(n / MIB, 1)


def _sum(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def _judge(figures: dict, limit: int) -> None:
    ipc_f, bytes_f = figures["ipc"], figures["bytes"]
    wrong = [m for m, f in figures.items() if isinstance(f, dict) and
             (not f["weights_equal"] or f["version"] != 1 or f["kv_awake_in_sync"])]
    if wrong:
        raise CheckFailed(f"modes {wrong}: weights differ, version not 1, or the KV cache was "
                          "awake during the sync", figures)
    if ipc_f["largest_message_bytes"] >= HANDLE_LIMIT:
        raise CheckFailed(f"an IPC bucket message took {ipc_f['largest_message_bytes']} bytes; "
                          f"expected < {HANDLE_LIMIT} (a handle)", figures)
    if ipc_f["_extra"] is not None and ipc_f["_extra"] > limit:
        raise CheckFailed(f"the IPC sync added {ipc_f['_extra'] / MIB:.1f} MiB on the GPU; "
                          f"expected <= {limit / MIB:.1f} (one bucket + the largest tensor)",
                          figures)
    for f in (ipc_f, bytes_f):
        f.pop("_extra")


def measure(torch, device, dims: tuple, bucket: int) -> dict:
    shapes = llama_shapes(*dims)
    g = torch.Generator(device=device).manual_seed(0)
    source = {n: torch.randn(s, generator=g, device=device, dtype=torch.bfloat16)
              for n, s in shapes.items()}
    figures: dict = {"dims": dims, "model_mib": round(sum(BF16 * t.numel() for t in
                                                        source.values()) / MIB, 1),
                     "bucket_mib": round(bucket / MIB, 3),
                     "bound_mib": round(bound(shapes, bucket) / MIB, 1)}
    with engine_process(dims, device) as llm:
        for mode in ("ipc", "bytes"):
            figures[mode] = sync_once(torch, llm, source, device, mode, bucket)
    _judge(figures, bound(shapes, bucket))
    ipc_f, bytes_f = figures["ipc"], figures["bytes"]
    figures["summary"] = (f"{figures['model_mib']:,.0f} MiB: ipc {ipc_f['seconds']} s "
                          f"({ipc_f['largest_message_bytes']} B/message), bytes "
                          f"{bytes_f['seconds']} s ({bytes_f['largest_message_bytes']:,} B)")
    return figures


def check(argv: list[str]) -> dict:
    import torch

    from alignflow.tasks.engines.vllm.config import VLLMEngineConfig

    bucket = VLLMEngineConfig().sync_bucket_bytes
    if argv[:1] == ["cpu"] or not torch.cuda.is_available():
        return {"device": "cpu", **measure(torch, torch.device("cpu"), CPU_DIMS,
                                           bucket // 32**2)}
    device = torch.device("cuda", torch.cuda.current_device())
    return {"device": torch.cuda.get_device_properties(device).name,
            **measure(torch, device, GPU_DIMS, bucket)}


if __name__ == "__main__":
    run(check)
