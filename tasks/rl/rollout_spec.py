"""What the generator worker is built from (a record the driver fills in), apart from
`rollout_host.py` (torch, transformers) so the driver of a Ray run imports neither."""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.tasks.plan.hosts import HostPlan, VLLMEngines


@dataclass(frozen=True, kw_only=True)
class RolloutSpec:
    """What the generator worker builds: its plan (GPUs, engine), the policy's architecture
    and sampling batch."""

    plan: HostPlan
    engines: VLLMEngines | None = None  # the run's vLLM engines, driven from this worker
    pretrain: str
    dtype: str = "fp32"
    micro_rollout_batch_size: int = 8
    num_threads: int | None = None
    agent_func_path: str | None = None
