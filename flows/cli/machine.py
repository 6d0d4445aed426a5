"""What a run asks of the machine it is planned for, refused before anything starts: one
line each, by `alignflow run` and its `--dry-run`, never at run time. `--ignore-hardware`
leaves those flags out instead (`flows/compat/argv.py`) and runs on what the machine has.

- the GPUs the plan reserves (`RunPlan.check_fits`; on a machine without GPUs a role's
  `num_gpus_per_node` counts worker processes, docs/DISTRIBUTED.md);
- vLLM engines where vLLM is not installed (else the HF engine would run instead);
- tensor parallelism or flash attention without a GPU, flash attention without flash-attn.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from alignflow.errors import ConfigError
from alignflow.flows.config.lookup import value_at
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.records import RunPlan

HOW = "run it where there is one, or add --ignore-hardware to run on this machine"


def machine_problems(cfg: Any, plan: RunPlan) -> list[str]:
    """Every way `cfg` asks for hardware `plan`'s cluster does not have, one line each."""
    problems, gpus = [], plan.cluster.gpus
    try:
        plan.check_fits()
    except ConfigError as exc:
        problems.append(f"{exc} ({HOW})")
    engines, engine = value_at(cfg, "vllm.num_engines"), value_at(cfg, "rollout.engine")
    if (engines or engine == "vllm") and not rules.vllm_installed():
        asked = f"vllm.num_engines = {engines}" if engines else "rollout.engine = 'vllm'"
        problems.append(f"{asked}: vLLM is not installed on this machine (the HF engine would "
                        f"generate instead); expected vLLM installed, or --ignore-hardware")
    if (value_at(cfg, "vllm.tensor_parallel_size") or 1) > 1 and not gpus:
        problems.append("vllm.tensor_parallel_size > 1: tensor parallelism needs GPUs; this "
                        f"machine has none ({HOW})")
    attention = value_at(cfg, "ds.attn_implementation") or ""
    if attention.startswith("flash") and not gpus:
        problems.append(f"ds.attn_implementation = {attention!r}: flash attention needs a GPU; "
                        f"this machine has none ({HOW}; sdpa runs anywhere)")
    elif attention.startswith("flash") and importlib.util.find_spec("flash_attn") is None:
        problems.append(f"ds.attn_implementation = {attention!r}: flash-attn is not installed "
                        "on this machine; expected `pip install flash-attn`, sdpa, or "
                        "--ignore-hardware")
    return problems
