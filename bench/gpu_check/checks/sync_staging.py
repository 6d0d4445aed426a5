"""A 7B-shaped weight sync on the GPU: the memory it adds above the weights (issue 41, "The
one-GPU check grows").

Random bf16 weights of Llama-2-7B's shape (6.74B parameters, 13.5 GB; fewer layers where
the GPU less a 40 GiB reservation cannot hold two copies and the bound) stand for the
trainer's; an engine's model of the same shape takes them as the engine now loads a sync:
`engine_sync.WeightSync.update_weights` packs buckets of the engine's default size on this
GPU (an in-process `uni` engine's `pack_device`) and hands each by reference to the vLLM
worker extension (`worker.AlignflowWorkerExtension.alignflow_stage_bucket`), which loads it
at once into the fake vLLM model of tests/fast/test_sync_staging.py (`LayerwiseModel`: a
fused layer keeps what it is handed until it has all its tensors). The extra peak is
torch's `max_memory_allocated` over the sync less the two copies of the weights; expected
at most one bucket + the largest tensor (the embedding, in a bucket of its own). `cpu` as
argument: the same at 1/32 of each dimension on the CPU, its staging counted by that
test's dispatch-mode counter (`Allocations`).
"""

from __future__ import annotations

import contextlib
import sys
import time
import types

from bench.gpu_check.checks.common import CheckFailed, cuda, run

LLAMA_7B = (4096, 11008, 32000, 32)  # hidden, MLP, vocabulary, layers
CPU_SCALE = 32  # the CPU test's scale: every dimension / 32, the bucket / 32²
RESERVED = 40 << 30  # left to the rest of a colocated GPU (an engine's share, a trainer)
BF16, GIB, MIB = 2, 1 << 30, 1 << 20


def llama_shapes(hidden: int, mlp: int, vocab: int, layers: int) -> dict[str, tuple]:
    """Every tensor's shape under HF's names, in `state_dict` order."""
    shapes = {"model.embed_tokens.weight": (vocab, hidden)}
    for i in range(layers):
        at, ff = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
        shapes |= {f"{at}.{p}_proj.weight": (hidden, hidden) for p in "qkvo"}
        shapes |= {f"{ff}.gate_proj.weight": (mlp, hidden), f"{ff}.up_proj.weight":
                   (mlp, hidden), f"{ff}.down_proj.weight": (hidden, mlp)}
        shapes |= {f"model.layers.{i}.{n}.weight": (hidden,)
                   for n in ("input_layernorm", "post_attention_layernorm")}
    return shapes | {"model.norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}


def _bytes(shapes: dict[str, tuple]) -> tuple[int, int]:
    """(the model's bf16 bytes, its largest tensor's)."""
    sizes = [BF16 * _numel(s) for s in shapes.values()]
    return sum(sizes), max(sizes)


def _numel(shape: tuple) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return n


def bound(shapes: dict[str, tuple], bucket: int) -> int:
    """One bucket (a tensor over the bucket size: a bucket of its own) + the largest tensor."""
    from alignflow.tasks.engines.vllm.weights import ALIGN

    largest = _bytes(shapes)[1]
    return max(bucket, -(-largest // ALIGN) * ALIGN) + largest


def layers_that_fit(dims: tuple, room: int, bucket: int) -> int:
    """The most layers (up to the shape's own) whose two copies and bound fit in `room`."""
    hidden, mlp, vocab, layers = dims
    while layers > 1:
        shapes = llama_shapes(hidden, mlp, vocab, layers)
        if 2 * _bytes(shapes)[0] + bound(shapes, bucket) <= room:
            break
        layers -= 1
    return layers


@contextlib.contextmanager
def vllm_reload_api():
    """vLLM's layerwise reload and config context, as the worker imports them, for the
    fake model (what the CPU test's `reload_api` fixture puts in their place)."""
    reload = types.ModuleType("vllm.model_executor.model_loader.reload")
    reload.initialize_layerwise_reload = lambda model: None
    reload.finalize_layerwise_reload = lambda model, config: model.finish()
    config = types.ModuleType("vllm.config")
    config.set_current_vllm_config = lambda c: contextlib.nullcontext()
    saved = {m.__name__: sys.modules.get(m.__name__) for m in (reload, config)}
    sys.modules.update({reload.__name__: reload, config.__name__: config})
    try:
        yield
    finally:
        for name, module in saved.items():
            sys.modules.pop(name) if module is None else sys.modules.update({name: module})


def _engine(worker, shapes: dict[str, tuple], bucket: int, device):
    """`VLLMEngine`'s sync with its worker in this process: `collective_rpc` calls the
    worker extension's method directly, as vLLM's `uni` executor does."""
    from alignflow.tasks.engines.vllm.engine_sync import WeightSync

    class Engine(WeightSync):
        def wake(self, tags=()) -> bool:
            return False

    engine = Engine()
    engine.llm = types.SimpleNamespace(
        collective_rpc=lambda method, args=(): [getattr(worker, method)(*args)],
        reset_prefix_cache=lambda: True)
    engine.config = types.SimpleNamespace(sync_bucket_bytes=bucket)
    engine.pack_device, engine.model_path, engine._tied = device, "random weights", False
    engine._shapes = {n: list(s) for n, s in shapes.items()}
    engine.policy_version, engine._before = 0, None
    return engine


def _sync(torch, engine, source: dict, held: list) -> tuple[int, float]:
    """(bytes the sync added at its peak, seconds)."""
    from tests.fast.test_sync_staging import Allocations

    device = next(iter(source.values())).device
    if device.type != "cuda":
        with Allocations(held) as counted:
            start = time.perf_counter()
            engine.update_weights(source.items(), version=1)
            return counted.peak, time.perf_counter() - start
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    engine.update_weights(source.items(), version=1)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base, time.perf_counter() - start


def stage(torch, device, dims: tuple, bucket: int) -> dict:
    """One sync of random weights of shape `dims`; its figures (CheckFailed past the bound,
    or when a tensor arrived different)."""
    from tests.fast.test_sync_staging import LayerwiseModel, Worker

    shapes = llama_shapes(*dims)
    g = torch.Generator(device=device).manual_seed(0)
    source = {n: torch.randn(s, generator=g, device=device, dtype=torch.bfloat16)
              for n, s in shapes.items()}
    params = {n: torch.zeros_like(t) for n, t in source.items()}
    engine = _engine(Worker(LayerwiseModel(params)), shapes, bucket, device)
    with vllm_reload_api():
        extra, seconds = _sync(torch, engine, source, [*source.values(), *params.values()])
    wrong = [n for n, t in source.items() if not torch.equal(params[n], t)]
    model, largest = _bytes(shapes)
    limit = bound(shapes, bucket)
    figures = {"dims": dict(zip(("hidden", "mlp", "vocab", "layers"), dims, strict=True)),
               "params": model // BF16, "model_mib": round(model / MIB, 1),
               "bucket_mib": round(bucket / MIB, 3), "largest_tensor_mib": round(largest / MIB, 3),
               "extra_peak_mib": round(extra / MIB, 3), "bound_mib": round(limit / MIB, 3),
               "seconds": round(seconds, 3), "gb_per_s": round(model / seconds / 1e9, 2),
               "version": engine.policy_version, "tensors_differing": len(wrong)}
    figures["summary"] = (f"{model / MIB:,.0f} MiB synced in {seconds:.2f} s, extra peak "
                          f"{extra / MIB:.1f} MiB (bound {limit / MIB:.1f})")
    if wrong or engine.policy_version != 1:
        raise CheckFailed(f"{len(wrong)} tensors differ after the sync ({wrong[:3]}); "
                          f"version {engine.policy_version}, expected 1", figures)
    if extra > limit:
        raise CheckFailed(f"the sync added {extra / MIB:.1f} MiB above the weights; expected "
                          f"<= {limit / MIB:.1f} (one bucket + the largest tensor)", figures)
    return figures


def _bucket_bytes() -> int:
    """The engine's default `vllm.sync_bucket_bytes`."""
    from alignflow.tasks.engines.vllm.config import VLLMEngineConfig

    return VLLMEngineConfig().sync_bucket_bytes


def check(argv: list[str]) -> dict:
    if argv[:1] == ["cpu"]:
        import torch

        dims = tuple(d // CPU_SCALE for d in LLAMA_7B[:3]) + LLAMA_7B[3:]
        return {"device": "cpu", **stage(torch, torch.device("cpu"), dims,
                                         _bucket_bytes() // CPU_SCALE**2)}
    torch = cuda()
    bucket, device = _bucket_bytes(), torch.device("cuda", torch.cuda.current_device())
    props = torch.cuda.get_device_properties(device)
    room = props.total_memory - RESERVED
    dims = LLAMA_7B[:3] + (layers_that_fit(LLAMA_7B, room, bucket),)
    return {"device": props.name, "room_gib": round(room / GIB, 1),
            **stage(torch, device, dims, bucket)}


if __name__ == "__main__":
    run(check)
