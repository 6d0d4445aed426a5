"""What a model host is built from: a record the driver fills in and the host's worker
reads. Lives apart from `host.py` (torch, transformers) so the driver of a Ray run, which
only declares hosts, imports none of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from alignflow.tasks.plan.hosts import EngineKind, HostPlan, VLLMEngines
from alignflow.tasks.plan.placement import Role

if TYPE_CHECKING:
    from alignflow.tasks.modeling.device import Attention
    from alignflow.tasks.rewards.registry import RewardConfig
    from alignflow.tasks.trainers.base import Precision
    from alignflow.tasks.trainers.deepspeed.section import DSConfig


@dataclass(frozen=True, kw_only=True)
class HostSpec:
    """Everything a host needs to build its roles: its plan (roles, GPUs, trainers with the
    run's length filled in, engine) and the models it loads."""

    plan: HostPlan
    engines: VLLMEngines | None = None  # the run's vLLM engines, when this host drives them
    sampled_by: EngineKind = "hf"  # the engine the run's batches are sampled with
    pretrain: str  # the policy's starting point (and the tokenizer)
    ref_pretrain: str | None = None  # default: pretrain
    critic_pretrain: str | None = None  # default: pretrain
    critic_normalize: bool = False  # reward.normalize_enable: values by the config's mean/std
    ema_beta: float | None = None  # train.enable_ema: the policy's EMA with this β (None: off)
    dtype: Precision = "fp32"  # of the engine's and the reference's weights
    rewards: RewardConfig | None = None
    micro_rollout_batch_size: int = 8
    num_threads: int | None = None
    keep_checkpoints: int = 2
    offload: tuple[Role, ...] = ()  # roles parked on disk between uses (ref, reward)
    attn_implementation: Attention = "sdpa"
    trainer_sleep: bool = False  # ds.enable_sleep: trainers leave the GPU between learn steps
    ds: DSConfig | None = None  # the run's ds section: frozen models follow its ZeRO-3
    planned_peak: int | None = None  # bytes: the plan's peak of this host's GPU (None: unknown)
