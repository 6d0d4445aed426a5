"""A weight sync holds one bucket on an engine, not the model (issue 41, item 4).

The vLLM worker extension (`tasks/engines/vllm/worker.py`) receives the buckets of a
Llama-2-7B-shaped model scaled down (every dimension / 32: hidden 128, MLP 344, vocab 1000,
32 layers, bf16; the default 128 MiB bucket / 32² as the 2-D tensors shrink) into a model
that holds memory as vLLM's layerwise reload does: a fused layer keeps the tensors handed to
it until it has all of them (q, k, v; gate, up). Every tensor storage made during the sync
is counted while it lives (a dispatch mode sees each allocation, views share their base's
storage): the peak must stay within one bucket and the largest tensor. Staging every
bucket until the commit, as the worker did, holds the whole model (~13 MB here, 15.2 GB at
7B) against a bound of 0.5 MB.
"""

from __future__ import annotations

import contextlib
import sys
import types
import weakref

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from alignflow.tasks.engines.vllm.weights import ALIGN, pack_buckets
from alignflow.tasks.engines.vllm.worker import AlignflowWorkerExtension

H, MLP, VOCAB, LAYERS = 4096 // 32, 11008 // 32, 32000 // 32, 32  # Llama-2-7B / 32
BUCKET = (128 << 20) // 32**2  # the default bucket, scaled as the 2-D tensors are
BF16 = 2
FUSED = {"q_proj": ("qkv_proj", 3), "k_proj": ("qkv_proj", 3), "v_proj": ("qkv_proj", 3),
         "gate_proj": ("gate_up_proj", 2), "up_proj": ("gate_up_proj", 2)}


def llama_7b_shaped() -> dict[str, torch.Tensor]:
    """Random bf16 weights under HF's names, in `state_dict` order."""
    g = torch.Generator().manual_seed(0)
    shapes = {"model.embed_tokens.weight": (VOCAB, H)}
    for i in range(LAYERS):
        at, mlp = f"model.layers.{i}.self_attn", f"model.layers.{i}.mlp"
        shapes.update({f"{at}.{p}.weight": (H, H) for p in ("q_proj", "k_proj", "v_proj",
                                                            "o_proj")})
        shapes.update({f"{mlp}.gate_proj.weight": (MLP, H), f"{mlp}.up_proj.weight": (MLP, H),
                       f"{mlp}.down_proj.weight": (H, MLP)})
        shapes.update({f"model.layers.{i}.{n}.weight": (H,) for n in
                       ("input_layernorm", "post_attention_layernorm")})
    shapes.update({"model.norm.weight": (H,), "lm_head.weight": (VOCAB, H)})
    return {n: torch.randn(s, generator=g).to(torch.bfloat16) for n, s in shapes.items()}


def layer_of(name: str) -> tuple[str, int]:
    """vLLM's layer for an HF tensor name, and how many tensors it loads from."""
    module, _, _ = name.rpartition(".")
    parent, _, leaf = module.rpartition(".")
    fused, parts = FUSED.get(leaf, (leaf, 1))
    return f"{parent}.{fused}", parts


class LayerwiseModel:
    """A model under vLLM's layerwise reload, as it holds memory: a layer keeps what it is
    handed until it has all its tensors, then copies them into its parameters."""

    def __init__(self, params: dict[str, torch.Tensor]) -> None:
        self.params, self.waiting = params, {}

    def load_weights(self, weights) -> set[str]:
        loaded = set()
        for name, tensor in weights:
            layer, parts = layer_of(name)
            self.waiting.setdefault(layer, []).append((name, tensor))
            if len(self.waiting[layer]) == parts:
                loaded |= self._load(self.waiting.pop(layer))
        return loaded

    def _load(self, tensors) -> set[str]:
        for name, tensor in tensors:
            self.params[name].copy_(tensor)
        return {name for name, _ in tensors}

    def finish(self) -> None:
        """vLLM's `finalize_layerwise_reload`: layers still waiting load what they have."""
        for tensors in self.waiting.values():
            self._load(tensors)
        self.waiting = {}


class Worker(AlignflowWorkerExtension):
    """A vLLM worker with alignflow's extension, over `LayerwiseModel`; `reload_weights` is
    the worker's in-place reload (`vllm.model_executor.model_loader.reload.inplace`)."""

    vllm_config = None

    def __init__(self, model: LayerwiseModel) -> None:
        config = types.SimpleNamespace(hf_config=types.SimpleNamespace())
        self.model_runner = types.SimpleNamespace(model_config=config, get_model=lambda: model)

    def reload_weights(self, weights_iterator, is_checkpoint_format: bool = True) -> None:
        model = self.model_runner.get_model()
        model.load_weights(weights_iterator)
        model.finish()


@pytest.fixture(autouse=True)
def reload_api(monkeypatch):
    """vLLM's layerwise reload and config context, as the worker imports them."""
    reload = types.ModuleType("vllm.model_executor.model_loader.reload")
    reload.initialize_layerwise_reload = lambda model: None
    reload.finalize_layerwise_reload = lambda model, config: model.finish()
    config = types.ModuleType("vllm.config")
    config.set_current_vllm_config = lambda c: contextlib.nullcontext()
    monkeypatch.setitem(sys.modules, reload.__name__, reload)
    monkeypatch.setitem(sys.modules, config.__name__, config)


class Allocations(TorchDispatchMode):
    """Bytes of the tensor storages made while it is on and still alive; their peak."""

    def __init__(self, before: list[torch.Tensor]) -> None:
        super().__init__()
        self.before = {id(t.untyped_storage()) for t in before}
        self.keep = [t.untyped_storage() for t in before]  # their ids stay theirs
        self.alive: dict[int, weakref.ref] = {}
        self.live = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                self._count(tensor.untyped_storage())
        return out

    def _count(self, storage) -> None:
        key = id(storage)
        if key in self.before or key in self.alive:
            return
        nbytes = storage.nbytes()
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        self.alive[key] = weakref.ref(storage, lambda _r: self._gone(key, nbytes))

    def _gone(self, key: int, nbytes: int) -> None:
        self.live -= nbytes
        self.alive.pop(key, None)


def _sync(worker: Worker, source: dict[str, torch.Tensor]) -> None:
    """One sync as a transport delivers it: each bucket handed over, then let go."""
    worker.alignflow_drop_staged()
    for bucket in pack_buckets(source.items(), BUCKET):
        worker.alignflow_stage_bucket(*bucket.as_args())
        del bucket
    worker.alignflow_commit_weights()


def test_a_sync_holds_one_bucket_and_a_tensor_not_the_model():
    source = llama_7b_shaped()
    params = {n: torch.zeros_like(t) for n, t in source.items()}
    worker = Worker(LayerwiseModel(params))
    largest = max(t.numel() for t in source.values()) * BF16  # the embedding: 1000 × 128
    model_bytes = sum(t.numel() for t in source.values()) * BF16
    biggest_bucket = max(BUCKET, -(-largest // ALIGN) * ALIGN)  # a tensor over it: its own
    with Allocations(list(source.values()) + list(params.values())) as held:
        _sync(worker, source)
    print(f"sync staged at most {held.peak} bytes of a {model_bytes}-byte model "
          f"(bound {biggest_bucket + largest})")
    assert held.peak <= biggest_bucket + largest < model_bytes / 20
    assert all(torch.equal(params[n], t) for n, t in source.items())


def test_a_sync_that_stops_halfway_leaves_a_runnable_model_of_both_versions():
    """The reload is closed (`finalize`: the layers run again) and nothing is held; the
    engine, not the worker, then serves no version until a whole sync."""
    source = llama_7b_shaped()
    params = {n: torch.zeros_like(t) for n, t in source.items()}
    model = LayerwiseModel(params)
    worker = Worker(model)
    buckets = pack_buckets(source.items(), BUCKET)
    for _ in range(3):
        worker.alignflow_stage_bucket(*next(buckets).as_args())
    assert worker.alignflow_drop_staged() > 0 and model.waiting == {}
    assert torch.equal(params["model.embed_tokens.weight"], source["model.embed_tokens.weight"])
    assert not params["lm_head.weight"].any()
    assert worker.alignflow_drop_staged() == 0  # nothing open any more
