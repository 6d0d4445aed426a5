"""The parts of vLLM alignflow calls, and their signatures as recorded from the vLLM the
code is tested with (`api.tsv`, from vLLM 0.32's source: `bench/vllm_api/record.py`).

The `vllm` extra pins that version. Two tests keep the code and vLLM in step: on the main
environment (no vLLM) the calls the code makes are checked against the recorded table; in
the vLLM environment (`make test-vllm`) the installed vLLM's live signatures must equal the
table, so an upgrade that drifts fails there first, naming the callable.

An entry is `callable \\t kind \\t names`: kind `signature` lists `name:p|pk|k|*|**`
(positional-only, positional-or-keyword, keyword-only, *args, **kwargs); kind `fields` the
field names of a dataclass, msgspec struct or TypedDict. Importable without vLLM.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from pathlib import Path

TABLE = Path(__file__).with_name("api.tsv")
VERSION = "0.32"  # the vLLM the table was recorded from (the `vllm` extra's pin)
KINDS = {inspect.Parameter.POSITIONAL_ONLY: "p", inspect.Parameter.POSITIONAL_OR_KEYWORD: "pk",
         inspect.Parameter.KEYWORD_ONLY: "k", inspect.Parameter.VAR_POSITIONAL: "*",
         inspect.Parameter.VAR_KEYWORD: "**"}
# where each callable lives: (module, qualified name, kind); LLM(**kw) forwards kw to
# EngineArgs, the worker's reload_weights(*a, **kw) to the model runner's
CALLABLES = {
    "LLM.__init__": ("vllm.entrypoints.llm", "LLM.__init__", "signature"),
    "LLM.generate": ("vllm.entrypoints.llm", "LLM.generate", "signature"),
    "LLM.collective_rpc": ("vllm.entrypoints.llm", "LLM.collective_rpc", "signature"),
    "LLM.sleep": ("vllm.entrypoints.llm", "LLM.sleep", "signature"),
    "LLM.wake_up": ("vllm.entrypoints.llm", "LLM.wake_up", "signature"),
    "LLM.reset_prefix_cache": ("vllm.entrypoints.llm", "LLM.reset_prefix_cache", "signature"),
    "LLM.get_tokenizer": ("vllm.entrypoints.llm", "LLM.get_tokenizer", "signature"),
    "EngineArgs": ("vllm.engine.arg_utils", "EngineArgs", "fields"),
    "SamplingParams": ("vllm.sampling_params", "SamplingParams", "fields"),
    "TokensPrompt": ("vllm.inputs.llm", "TokensPrompt", "fields"),
    "Worker.reload_weights": ("vllm.v1.worker.gpu_worker", "Worker.reload_weights", "signature"),
    "Worker.sleep": ("vllm.v1.worker.gpu_worker", "Worker.sleep", "signature"),
    "Worker.wake_up": ("vllm.v1.worker.gpu_worker", "Worker.wake_up", "signature"),
    "GPUModelRunner.reload_weights": ("vllm.v1.worker.gpu_model_runner",
                                      "GPUModelRunner.reload_weights", "signature"),
    "TopKTopPSampler.forward_native": ("vllm.v1.sample.ops.topk_topp_sampler",
                                       "TopKTopPSampler.forward_native", "signature"),
    "stateless_init_process_group": ("vllm.distributed.weight_transfer.nccl_common",
                                     "stateless_init_process_group", "function"),
    "initialize_layerwise_reload": ("vllm.model_executor.model_loader.reload.layerwise",
                                    "initialize_layerwise_reload", "function"),
    "finalize_layerwise_reload": ("vllm.model_executor.model_loader.reload.layerwise",
                                  "finalize_layerwise_reload", "function"),
    "set_current_vllm_config": ("vllm.config.vllm", "set_current_vllm_config", "function"),
    "PyNcclCommunicator.broadcast": ("vllm.distributed.device_communicators.pynccl",
                                     "PyNcclCommunicator.broadcast", "signature"),
    "PyNcclCommunicator.destroy": ("vllm.distributed.device_communicators.pynccl",
                                   "PyNcclCommunicator.destroy", "signature"),
}
FORWARDS = {"LLM.__init__": "EngineArgs", "Worker.reload_weights": "GPUModelRunner.reload_weights"}


def load_table(path: Path = TABLE) -> dict[str, tuple[str, ...]]:
    """callable -> its recorded names (with kinds for signatures)."""
    table = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _kind, names = line.split("\t")
            table[name] = tuple(n for n in names.split(",") if n)
    return table


def live_table() -> dict[str, tuple[str, ...]]:
    """The same entries read from the installed vLLM (imports it)."""
    return {name: _live(module, qualname, kind)
            for name, (module, qualname, kind) in CALLABLES.items()}


def _live(module: str, qualname: str, kind: str) -> tuple[str, ...]:
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if kind == "fields":
        if dataclasses.is_dataclass(obj):
            return tuple(sorted(f.name for f in dataclasses.fields(obj)))
        return tuple(sorted(getattr(obj, "__struct_fields__", None) or obj.__annotations__))
    params = list(inspect.signature(obj).parameters.values())[kind == "signature":]  # self
    return tuple(f"{p.name}:{KINDS[p.kind]}" for p in params)


def refusals(table: dict[str, tuple[str, ...]], callable_: str, *, positional: int = 0,
             keywords: tuple[str, ...] = ()) -> list[str]:
    """What `callable_` (as the table records it) would refuse of a call with `positional`
    arguments and these `keywords`, following `**kwargs` to where vLLM forwards them."""
    if callable_ not in table:
        return [f"{callable_}: not in the recorded table"]
    names = table[callable_]
    if names and all(":" not in n for n in names):  # fields: keywords only
        return [f"{callable_} has no field {k!r}" for k in keywords if k not in names]
    kinds = dict(n.split(":") for n in names)
    out = []
    takes = sum(k in ("p", "pk") for k in kinds.values())
    if positional > takes and "*" not in kinds.values():
        out.append(f"{callable_} takes {takes} positional argument(s), got {positional}")
    rest = [k for k in keywords if kinds.get(k) not in ("pk", "k")]
    if rest and "**" in kinds.values() and callable_ in FORWARDS:
        return out + refusals(table, FORWARDS[callable_], keywords=tuple(rest))
    if "**" not in kinds.values():
        out += [f"{callable_} has no keyword {k!r}" for k in rest]
    return out
