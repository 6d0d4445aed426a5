"""RL flows on CUDA: roles placed on GPUs, bf16 with fp32 master weights, gradient
checkpointing for actor and critic, GPU peak memory in `metrics`, and (where the `vllm`
wheel is installed) generation with vLLM colocated with sleep/wake, or on its own GPU with
the weights broadcast over NCCL. Skipped without CUDA (tests/gpu/conftest.py).

The model is `$ALIGNFLOW_GPU_TEST_MODEL` (a short name or a folder; default smollm2-135m):
an offline GPU node, whose files must travel in 64 MiB, runs them on `tiny-llama`.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from alignflow.catalog.catalog import Catalog
from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.zoo.registry import resolve_model

BF16_MISMATCH = 0.5  # bf16 vLLM vs bf16-autocast trainer: max |Δ logprob| per token
PLENTY = 1024  # a node with GPUs to spare: the plan's own count
MODEL = os.environ.get("ALIGNFLOW_GPU_TEST_MODEL", "smollm2-135m")


def _sets(**extra: str) -> list[str]:
    base = {"actor.model_name_or_path": str(resolve_model(MODEL)),
            "data.max_samples": "16", "rollout.batch_size": "4",
            "rollout.n_samples_per_prompt": "4", "rollout.max_new_tokens": "32",
            "reward.sources": "rule:target:e", "train.batch_size": "16",
            "train.micro_batch_size": "4", "train.max_iterations": "2",
            "actor.num_gpus_per_node": "1", "ds.param_dtype": "bf16",
            "train.colocate_all": "true"}  # one GPU: every role on it (unset: roles apart)
    return [f"{k}={v}" for k, v in {**base, **extra}.items()]


def _run(flow_name: str, sets: list[str], store, run_id: str, executor: str = "inline"):
    flow, cfg_cls = load_flow(flow_name)
    cfg = load_config(cfg_cls, sets=sets)
    _needs_gpus(cfg)
    return api.run(flow, cfg, store=str(store), run_id=run_id, executor=executor, seed=1)


def _needs_gpus(cfg) -> None:
    """Skip unless this machine holds the run's plan: the GPUs its hosts, generator and
    vLLM engines reserve on a GPU node, counted as the run counts them (one GPU runs what
    fits on one)."""
    have, cpus = torch.cuda.device_count(), float(os.cpu_count() or 1)
    needed = cfg.run_plan(Cluster(gpus_per_node=PLENTY, cpus_per_node=cpus)).gpus
    if needed > have:
        pytest.skip(f"needs {needed:g} GPU(s) as planned; this machine has {have}")
    try:
        cfg.run_plan(Cluster(gpus_per_node=have, cpus_per_node=cpus)).check_fits()
    except ConfigError as exc:
        pytest.skip(f"the plan does not fit this machine: {exc}")


def _metrics(store, run_id: str, prefix: str) -> dict[str, list[float]]:
    rows = Catalog(str(store)).sql("SELECT key, value FROM metrics WHERE run_id = ? AND key "
                                   "LIKE ? ORDER BY task_key", [run_id, prefix + "%"])
    out: dict[str, list[float]] = {}
    for r in rows.to_pylist():
        out.setdefault(r["key"], []).append(r["value"])
    return out


def _needs_vllm() -> None:
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("the vllm extra is not installed")


def test_grpo_hf_engine_on_gpu_bf16_checkpointing_records_peak_memory(tmp_path):
    _run("grpo", _sets(**{"rollout.engine": "hf", "actor.gradient_checkpointing_enable": "true"}),
         tmp_path, "hf")
    peaks = _metrics(tmp_path, "hf", "perf/gpu/")
    assert peaks["perf/gpu/actor/peak_allocated_gib"], peaks
    assert all(0 < v < torch.cuda.get_device_properties(0).total_memory / 2**30
               for v in peaks["perf/gpu/actor/peak_allocated_gib"])


def test_ppo_critic_with_gradient_checkpointing_on_gpu(tmp_path):
    """The crash this issue names: PPO + gradient checkpointing on the critic."""
    _run("ppo", _sets(**{"rollout.engine": "hf", "actor.gradient_checkpointing_enable": "true"}),
         tmp_path, "ppo")
    assert _metrics(tmp_path, "ppo", "perf/gpu/")


def test_grpo_vllm_colocated_with_sleep(tmp_path):
    _needs_vllm()
    _run("grpo", _sets(**{"rollout.engine": "vllm", "vllm.enable_sleep": "true",
                          "ds.enable_sleep": "true", "vllm.gpu_memory_utilization": "0.3"}),
         tmp_path, "colocated")
    found = _metrics(tmp_path, "colocated", "mismatch/")
    assert len(found["mismatch/logprob_abs_max"]) == 2
    assert max(found["mismatch/logprob_abs_max"]) < BF16_MISMATCH, found


def test_grpo_vllm_on_its_own_gpu_weights_broadcast_over_nccl(tmp_path, ray_local):
    """Trainer and engine on a GPU each (NCCL refuses both ends of the broadcast on one);
    the rule reward host takes none: 2 GPUs."""
    _needs_vllm()
    _run("grpo", _sets(**{"rollout.engine": "vllm", "train.colocate_all": "false",
                          "vllm.num_engines": "1", "vllm.sync_backend": "nccl",
                          "vllm.gpu_memory_utilization": "0.5"}),
         tmp_path, "separate", executor="ray")
    found = _metrics(tmp_path, "separate", "mismatch/")
    assert max(found["mismatch/logprob_abs_max"]) < BF16_MISMATCH, found
