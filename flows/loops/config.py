"""Configs of the durable loops: rejection sampling and iterative DPO.

They have no OpenRLHF counterpart; they take the RL flows' sections for generating
(`data.*`, `rollout.*`, `reward.*`) and the offline flows' for training (`model.*`,
`train.*`, the optimiser at the top level: `adam.lr`, `lr_warmup_ratio`, ...), and add the
round count; iterative DPO's `model` section is the `dpo` flow's (`model.beta`, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.errors import require
from alignflow.flows.compat import aliases
from alignflow.flows.tracking.config import LoggerConfig
from alignflow.tasks.data.source import DataConfig
from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.modeling.model_config import ModelConfig
from alignflow.tasks.offline.config import TrainSpec
from alignflow.tasks.offline.loss_config import DPOModelConfig
from alignflow.tasks.plan.build import HostAsk, RunAsk, build
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.placement import ALL_IN_ONE, PlacementConfig
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.rewards.registry import RewardConfig
from alignflow.tasks.steps.ckpt import CkptConfig
from alignflow.tasks.steps.rollout_config import RolloutConfig, check_lengths
from alignflow.tasks.trainers.config import TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.optim import Optimizer, TrainConfig


def _train() -> TrainConfig:
    return TrainConfig(batch_size=8, micro_batch_size=4)


@dataclass(frozen=True, kw_only=True)
class LoopConfig(Optimizer):
    """R rounds of: generate n per prompt with the current policy, score, select, fine-tune.

    rounds: rounds of generate → select → train
    final_eval: generate and score once more with the final policy (round R), for progress
    num_cpus: CPUs reserved for the loop's host
    num_gpus: GPUs reserved for the loop's host
    """

    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_sft", "train_ppo_ray")  # its flags' CLIs
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.loops(*OPENRLHF)
    RETIRED: ClassVar[frozenset[str]] = aliases.RETIRED_LOOPS
    RESUME_FIXED: ClassVar[dict[str, str]] = {"data.": "prompts"}  # `flows/control/reconfigure.py`
    KIND: ClassVar[str] = "sft"

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    train: TrainConfig = field(default_factory=_train)
    ckpt: CkptConfig = field(default_factory=CkptConfig)
    ds: DSConfig = field(default_factory=DSConfig)
    vllm: VLLMSection = field(default_factory=VLLMSection)
    lr_warmup_ratio: float = 0.0
    min_lr_ratio: float = 1.0
    rounds: int = 2
    final_eval: bool = True
    num_threads: int | None = field(default=None, metadata={"help": "torch threads of the host"})
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.rounds >= 1, "rounds", "an integer >= 1", self.rounds)
        check_lengths(self.rollout, self.data.max_len)
        if self.num_threads is not None:
            require(self.num_threads >= 1, "num_threads", "an integer >= 1 or null",
                    self.num_threads)
        for name in ("num_cpus", "num_gpus"):
            value = getattr(self, name)
            require(math.isfinite(value) and value >= 0, name, "a finite number >= 0", value)

    @property
    def steps_per_round(self) -> int:
        """Upper bound on a round's optimizer steps (every prompt kept): the LR schedule's unit."""
        per_epoch = -(-self.rollout.batch_size // self.train.batch_size)
        return per_epoch * self.train.max_epochs

    def trainer(self) -> TrainerConfig:
        return self.trainer_config(self.rounds * self.steps_per_round, self.train, self.ds,
                                   gradient_checkpointing=self.model.gradient_checkpointing_enable)

    def run_plan(self, cluster: Cluster | None = None) -> RunPlan:
        """One host holding the policy (trainer + engine) and the rewards; GPUs only when
        `num_gpus` asks (a round trains with the offline step, on the CPU otherwise), on
        `cluster` (default: the Ray cluster joined, else this machine)."""
        host = HostAsk(name=ALL_IN_ONE, roles=("actor", "reward"),
                       trains=(("actor", self.trainer()),), generates=True,
                       gpus_by_default=False)
        ask = RunAsk(hosts=(host,), ds=self.ds, engine=self.rollout.engine, vllm=self.vllm,
                     placement=PlacementConfig(num_cpus=self.num_cpus, num_gpus=self.num_gpus))
        return build(ask, cluster or Cluster.current())

    def train_spec(self) -> TrainSpec:
        return TrainSpec(kind=self.KIND, loss=self.model if self.KIND == "dpo" else None,
                         train_batch_size=self.train.batch_size,
                         micro_train_batch_size=self.train.micro_batch_size,
                         save_steps=self.ckpt.save_steps, eval_steps=-1,
                         loss_normalizer=self.train.loss_normalizer)


@dataclass(frozen=True, kw_only=True)
class RejectionSamplingConfig(LoopConfig):
    """Best-of-n fine-tuning: keep each prompt's best sample (if >= `threshold`), SFT on them."""

    threshold: float | None = field(default=None, metadata={
        "help": "minimum reward a best sample needs to be kept (null: keep every best)"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.threshold is not None:
            require(math.isfinite(self.threshold), "threshold", "a finite float or null",
                    self.threshold)


@dataclass(frozen=True, kw_only=True)
class IterativeDPOConfig(LoopConfig):
    """Best-vs-worst pairs per prompt (gap >= `margin`), DPO against the round's start policy."""

    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_dpo", "train_ppo_ray")
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.loops(*OPENRLHF) | {
        k: v for k, v in aliases.OFFLINE.items() if k.startswith(("loss.", "dpo."))}
    KIND: ClassVar[str] = "dpo"

    model: DPOModelConfig = field(default_factory=DPOModelConfig)
    margin: float = field(default=0.0, metadata={
        "help": "minimum reward gap best - worst for a pair (pairs with no gap are always skipped)"})
    reference_micro_batch: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        require(math.isfinite(self.margin) and self.margin >= 0, "margin",
                "a finite float >= 0", self.margin)
        require(self.reference_micro_batch >= 1, "reference_micro_batch", "an integer >= 1",
                self.reference_micro_batch)
