"""The configs of the offline training flows (SFT, CSFT, RM, DPO, KTO, distillation, PRM).

Every flow shares the model, data and optimiser sections and the training cadence; a flow
whose objective has knobs adds its `loss` section. OpenRLHF's flags (`--pretrain`,
`--dataset`, `--beta`, `--ipo`, `--save_steps`, ...) map onto the dotted keys
(`flows/aliases.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.errors import ConfigError
from alignflow.flows.aliases import ALIASES
from alignflow.tasks.modeling.model_config import DistillModelConfig, ModelConfig
from alignflow.tasks.offline.config import OfflineDataConfig, TrainSpec
from alignflow.tasks.offline.kinds import objective
from alignflow.tasks.offline.loss_config import (
    DPOLossConfig,
    KDLossConfig,
    KTOLossConfig,
    RMLossConfig,
)
from alignflow.tasks.trainers.optim import OptimConfig
from alignflow.tasks.trainers.plan import Plan


@dataclass(frozen=True, kw_only=True)
class OfflineConfig:
    """One offline training run; `KIND` names its objective (`tasks/offline/kinds.py`)."""

    KIND: ClassVar[str] = "sft"
    ALIASES: ClassVar[dict[str, str]] = ALIASES

    model: ModelConfig = field(default_factory=ModelConfig)
    data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    save_steps: int = field(default=-1, metadata={
        "help": "optimizer steps per train task (checkpoint); -1: one task for the run"})
    eval_steps: int = field(default=-1, metadata={"help": "eval every N steps (-1: at the end)"})
    max_steps: int | None = field(default=None, metadata={"help": "cap on optimizer steps"})
    num_threads: int | None = field(default=None, metadata={"help": "torch threads per host"})
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        if self.save_steps == 0 or self.save_steps < -1:
            raise ConfigError(f"save_steps={self.save_steps}: expected >= 1 or -1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"max_steps={self.max_steps}: expected >= 1 or null")

    @property
    def loss_config(self):
        """The objective's loss section, for flows that have one."""
        return getattr(self, "loss", None)

    def plan(self, order_seed: int, train_rows: int) -> Plan:
        """`max_epochs` passes in `train_batch_size` steps (each epoch's partial batch is
        dropped), capped by `max_steps`, in chunks of `save_steps`."""
        if train_rows < self.optim.train_batch_size:
            raise ConfigError(f"optim.train_batch_size={self.optim.train_batch_size}: larger "
                              f"than the {train_rows} training examples")
        return Plan.for_epochs(order_seed, train_rows, self.optim.train_batch_size,
                               self.optim.max_epochs, save_steps=self.save_steps,
                               drop_last=True, max_steps=self.max_steps)

    def train_spec(self) -> TrainSpec:
        return TrainSpec(kind=self.KIND, loss=self.loss_config,
                         train_batch_size=self.optim.train_batch_size,
                         micro_train_batch_size=self.optim.micro_train_batch_size,
                         save_steps=self.save_steps, eval_steps=self.eval_steps,
                         placeholder_token=self.data.placeholder_token,
                         reward_tokens=self.data.reward_tokens,
                         packing=self.optim.packing_samples and objective(self.KIND).packing)


def _data(**kw):
    return lambda: OfflineDataConfig(**kw)


def _optim(**kw):
    return lambda: OptimConfig(**kw)


@dataclass(frozen=True, kw_only=True)
class SFTConfig(OfflineConfig):
    """Supervised fine-tuning (loss on assistant turns; `pretrain_mode`: on every token)."""

    KIND: ClassVar[str] = "sft"
    data: OfflineDataConfig = field(default_factory=_data(dataset="alignflow:gsm8k-sft"))
    optim: OptimConfig = field(default_factory=_optim(learning_rate=5e-6))


@dataclass(frozen=True, kw_only=True)
class CSFTConfig(SFTConfig):
    """Conditional SFT: the prompt carries the row's score (`data.score_template`)."""

    KIND: ClassVar[str] = "csft"


@dataclass(frozen=True, kw_only=True)
class DistillConfig(SFTConfig):
    """Knowledge distillation: α·CE + (1−α)·KL(teacher‖student); `model.teacher_model`."""

    KIND: ClassVar[str] = "distill"
    model: DistillModelConfig = field(default_factory=DistillModelConfig)
    loss: KDLossConfig = field(default_factory=KDLossConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.model.teacher_model:
            raise ConfigError("model.teacher_model: distillation needs a teacher "
                              "(--teacher_model NAME_OR_PATH)")


@dataclass(frozen=True, kw_only=True)
class PRMConfig(OfflineConfig):
    """Process reward model: CE on the reward tokens at step placeholders."""

    KIND: ClassVar[str] = "prm"
    data: OfflineDataConfig = field(default_factory=_data(
        dataset="", apply_chat_template=False, label_key="value", reward_tokens=("+", "-")))
    optim: OptimConfig = field(default_factory=_optim(learning_rate=1e-6))


@dataclass(frozen=True, kw_only=True)
class RMConfig(OfflineConfig):
    """Reward model: pairwise loss on the value head's last-token score."""

    KIND: ClassVar[str] = "rm"
    optim: OptimConfig = field(default_factory=_optim(learning_rate=9e-6))
    loss: RMLossConfig = field(default_factory=RMLossConfig)


@dataclass(frozen=True, kw_only=True)
class DPOConfig(OfflineConfig):
    """DPO (β = 0.1), IPO (`--ipo`) or cDPO (`--label_smoothing`) against a cached reference."""

    KIND: ClassVar[str] = "dpo"
    loss: DPOLossConfig = field(default_factory=DPOLossConfig)


@dataclass(frozen=True, kw_only=True)
class KTOConfig(OfflineConfig):
    """KTO on chosen (desirable) / rejected (undesirable) responses."""

    KIND: ClassVar[str] = "kto"
    loss: KTOLossConfig = field(default_factory=KTOLossConfig)
