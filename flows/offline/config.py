"""The configs of the offline training flows (SFT, CSFT, RM, DPO, KTO, distillation, PRM),
under OpenRLHF 0.11's names (train_sft / train_dpo / train_rm): `model.*` (with the loss
knobs of the objective), `ref.*`, `data.*`, `eval.*`, `train.*`, `ckpt.*`, `ds.*`, and the
optimiser at the top level (`adam.*`, `lr_warmup_ratio`, `min_lr_ratio`, `max_norm`).

OpenRLHF 0.9's flags (`--pretrain`, `--dataset`, `--beta`, `--ipo`, `--save_steps`, ...)
map onto these keys (`flows/compat/aliases.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.errors import require
from alignflow.flows.compat import aliases
from alignflow.flows.config.lookup import value_at
from alignflow.flows.tracking.config import LoggerConfig
from alignflow.tasks.modeling.model_config import (
    ModelConfig,
    RefConfig,
    SFTModelConfig,
    TeacherConfig,
)
from alignflow.tasks.offline.config import (
    POLICY,
    TEACHER,
    TRAINED,
    EvalConfig,
    OfflineDataConfig,
    PrepareSpec,
    TrainSpec,
)
from alignflow.tasks.offline.kinds import objective
from alignflow.tasks.offline.loss_config import (
    DistillModelConfig,
    DPOModelConfig,
    KTOModelConfig,
    RMModelConfig,
)
from alignflow.tasks.plan.build import HostAsk, RunAsk, build
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.placement import GroupPlacement
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.steps.ckpt import CkptConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.optim import AdamConfig, Optimizer, TrainConfig
from alignflow.tasks.trainers.plan import Plan


@dataclass(frozen=True, kw_only=True)
class OfflineTrainConfig(TrainConfig):
    """max_steps: cap on optimizer steps (alignflow; null: every epoch)."""

    max_steps: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_steps is not None:
            require(self.max_steps >= 1, "max_steps", "an integer >= 1 or null", self.max_steps)


def _adam(lr: float):
    return lambda: AdamConfig(lr=lr)


@dataclass(frozen=True, kw_only=True)
class OfflineConfig(Optimizer):
    """One offline training run; `KIND` names its objective (`tasks/offline/kinds.py`)."""

    KIND: ClassVar[str] = "sft"
    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_sft",)  # the CLIs whose flags it takes
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.offline(*OPENRLHF)
    RETIRED: ClassVar[frozenset[str]] = aliases.RETIRED_OFFLINE
    # keys the first tasks fix for the whole run (a resume cannot change them once
    # committed: `flows/control/reconfigure.py`)
    RESUME_FIXED: ClassVar[dict[str, str]] = {
        "data.": "prepare", "eval.": "prepare", "train.batch_size": "plan",
        "train.max_epochs": "plan", "train.max_steps": "plan", "ckpt.save_steps": "plan"}
    LOSS_IN_MODEL: ClassVar[bool] = False  # the model section holds the loss knobs

    model: ModelConfig = field(default_factory=ModelConfig)
    data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    train: OfflineTrainConfig = field(default_factory=OfflineTrainConfig)
    ckpt: CkptConfig = field(default_factory=CkptConfig)
    ds: DSConfig = field(default_factory=DSConfig)
    placement: GroupPlacement = field(default_factory=GroupPlacement)
    adam: AdamConfig = field(default_factory=_adam(5e-7))
    num_threads: int | None = field(default=None, metadata={"help": "torch threads per host"})
    logger: LoggerConfig = field(default_factory=LoggerConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_threads is not None:
            require(self.num_threads >= 1, "num_threads", "an integer >= 1 or null",
                    self.num_threads)
        workers = self.placement.workers
        require(self.train.batch_size % workers == 0, "train.batch_size",
                f"a multiple of the {workers} training workers (placement.num_nodes × "
                "placement.num_gpus_per_node)", self.train.batch_size)
        require(not (self.ds.lora.enabled and objective(self.KIND).value_head), "ds.lora.rank",
                f"0 for {self.KIND} (LoRA on a value-head model is not available)",
                self.ds.lora.rank)

    def run_plan(self, cluster: Cluster | None = None) -> RunPlan:
        """The training host (`placement.*` workers; GPUs only when placement asks: the
        offline step trains on the CPU otherwise) and the distillation teacher's, on
        `cluster` (default: the Ray cluster joined, else this machine)."""
        trainer = self.trainer_config(1, self.train, self.ds, gradient_checkpointing=self
                                      .model.gradient_checkpointing_enable)
        hosts = [HostAsk(name=POLICY, roles=(TRAINED,), workers=self.placement,
                         trains=((TRAINED, trainer),), gpus_by_default=False)]
        if objective(self.KIND).teacher:
            hosts.append(HostAsk(name=TEACHER, roles=("teacher",), gpus_by_default=False))
        ask = RunAsk(hosts=tuple(hosts), placement=self.placement, ds=self.ds,
                     memory=self._memory)
        return build(ask, cluster or Cluster.current())

    def _memory(self) -> MemoryAsk:
        """What the plan's memory model reads of this config: its keys and each model's
        config.json (a folder, the Hub cache, a prepared name; a size not read is unknown:
        the plan records its peaks as unknown and refuses nothing on them)."""
        from alignflow.tasks.zoo.registry import model_config

        return MemoryAsk.of(lambda key: value_at(self, key), read=model_config,
                            kind=getattr(self, "KIND", ""))

    @property
    def loss_config(self):
        """The objective's loss knobs (its model section), for objectives that have some."""
        return self.model if self.LOSS_IN_MODEL else None

    @property
    def reference(self) -> str:
        """The reference model (DPO, KTO): `ref.model_name_or_path`, else the trained one."""
        ref = getattr(self, "ref", None)
        return (ref and ref.model_name_or_path) or self.model.model_name_or_path

    @property
    def prepare_spec(self) -> PrepareSpec:
        """What the prepare task reads."""
        return PrepareSpec(data=self.data, eval=self.eval,
                           pretrain_mode=getattr(self.model, "pretrain_mode_enable", False))

    def plan(self, order_seed: int, train_rows: int) -> Plan:
        """`max_epochs` passes in `train.batch_size` steps (each epoch's partial batch is
        dropped), capped by `max_steps`, in chunks of `ckpt.save_steps`."""
        require(train_rows >= self.train.batch_size, "train.batch_size",
                f"at most the {train_rows} training examples", self.train.batch_size)
        return Plan.for_epochs(order_seed, train_rows, self.train.batch_size,
                               self.train.max_epochs, save_steps=self.ckpt.save_steps,
                               drop_last=True, max_steps=self.train.max_steps)

    def train_spec(self) -> TrainSpec:
        return TrainSpec(kind=self.KIND, loss=self.loss_config,
                         train_batch_size=self.train.batch_size,
                         micro_train_batch_size=self.train.micro_batch_size,
                         save_steps=self.ckpt.save_steps, eval_steps=self.eval.steps,
                         placeholder_token=self.data.placeholder_token,
                         reward_tokens=self.data.reward_tokens,
                         packing=self.ds.packing_samples and objective(self.KIND).packing,
                         loss_normalizer=self.train.loss_normalizer)


def _data(**kw):
    return lambda: OfflineDataConfig(**kw)


def _train(micro_batch_size: int, max_epochs: int = 1):
    return lambda: OfflineTrainConfig(micro_batch_size=micro_batch_size, max_epochs=max_epochs)


def _eval(split: str):
    return lambda: EvalConfig(split=split)


TEMPLATE = "User: {}\nAssistant: "  # OpenRLHF's input_template of SFT, KTO and KD


@dataclass(frozen=True, kw_only=True)
class SFTConfig(OfflineConfig):
    """Supervised fine-tuning (loss on assistant turns; `pretrain_mode_enable`: every token)."""

    KIND: ClassVar[str] = "sft"
    model: SFTModelConfig = field(default_factory=SFTModelConfig)
    data: OfflineDataConfig = field(default_factory=_data(dataset="alignflow:gsm8k-sft",
                                                          input_template=TEMPLATE))
    eval: EvalConfig = field(default_factory=_eval("train"))
    train: OfflineTrainConfig = field(default_factory=_train(8, max_epochs=2))
    adam: AdamConfig = field(default_factory=_adam(5e-6))


@dataclass(frozen=True, kw_only=True)
class CSFTConfig(SFTConfig):
    """Conditional SFT: the prompt carries the row's score (`data.score_template`)."""

    KIND: ClassVar[str] = "csft"


@dataclass(frozen=True, kw_only=True)
class DistillConfig(SFTConfig):
    """Knowledge distillation: (1−kd_coef)·CE + kd_coef·KL(teacher‖student) against
    `teacher.model_name_or_path` (OpenRLHF's train_kd, last in v0.9.5)."""

    KIND: ClassVar[str] = "distill"
    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_kd",)
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.offline(*OPENRLHF)
    LOSS_IN_MODEL: ClassVar[bool] = True
    model: DistillModelConfig = field(default_factory=DistillModelConfig)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    data: OfflineDataConfig = field(default_factory=_data(
        dataset="alignflow:gsm8k-sft", input_template=TEMPLATE, output_key="output"))
    eval: EvalConfig = field(default_factory=_eval("test"))
    train: OfflineTrainConfig = field(default_factory=_train(8))

    def __post_init__(self) -> None:
        super().__post_init__()
        require(bool(self.teacher.model_name_or_path), "teacher.model_name_or_path",
                "the teacher model (--teacher_model NAME_OR_PATH)", None)


@dataclass(frozen=True, kw_only=True)
class PRMConfig(OfflineConfig):
    """Process reward model: CE on the reward tokens at step placeholders."""

    KIND: ClassVar[str] = "prm"
    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_prm",)
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.offline(*OPENRLHF)
    data: OfflineDataConfig = field(default_factory=_data(
        dataset="", label_key="label", placeholder_token="ки"))
    eval: EvalConfig = field(default_factory=_eval("test"))
    adam: AdamConfig = field(default_factory=_adam(1e-6))

    def __post_init__(self) -> None:
        super().__post_init__()
        require(bool(self.data.placeholder_token), "data.placeholder_token",
                "the token that ends each step in the data (--placeholder_token, e.g. ки)",
                self.data.placeholder_token)


@dataclass(frozen=True, kw_only=True)
class RMConfig(OfflineConfig):
    """Reward model: pairwise loss on the value head's last-token score."""

    KIND: ClassVar[str] = "rm"
    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_rm",)
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.offline(*OPENRLHF)
    LOSS_IN_MODEL: ClassVar[bool] = True
    model: RMModelConfig = field(default_factory=RMModelConfig)
    data: OfflineDataConfig = field(default_factory=_data(max_len=512))
    eval: EvalConfig = field(default_factory=_eval("train"))
    adam: AdamConfig = field(default_factory=_adam(9e-6))


@dataclass(frozen=True, kw_only=True)
class DPOConfig(OfflineConfig):
    """DPO (β = 0.1), IPO (`--ipo`) or cDPO (`--label_smoothing`) against a cached reference."""

    KIND: ClassVar[str] = "dpo"
    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_dpo",)
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.offline(*OPENRLHF)
    LOSS_IN_MODEL: ClassVar[bool] = True
    model: DPOModelConfig = field(default_factory=DPOModelConfig)
    ref: RefConfig = field(default_factory=RefConfig)
    data: OfflineDataConfig = field(default_factory=_data(max_len=512))
    eval: EvalConfig = field(default_factory=_eval("test"))
    train: OfflineTrainConfig = field(default_factory=_train(8))
    adam: AdamConfig = field(default_factory=_adam(1e-5))


@dataclass(frozen=True, kw_only=True)
class KTOConfig(OfflineConfig):
    """KTO on chosen (desirable) / rejected (undesirable) responses."""

    KIND: ClassVar[str] = "kto"
    OPENRLHF: ClassVar[tuple[str, ...]] = ("train_kto",)
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.offline(*OPENRLHF)
    LOSS_IN_MODEL: ClassVar[bool] = True
    model: KTOModelConfig = field(default_factory=KTOModelConfig)
    ref: RefConfig = field(default_factory=RefConfig)
    data: OfflineDataConfig = field(default_factory=_data(
        dataset="alignflow:champ-kto", input_template=TEMPLATE, label_key="label"))
    eval: EvalConfig = field(default_factory=_eval("test"))
    train: OfflineTrainConfig = field(default_factory=_train(8))
    adam: AdamConfig = field(default_factory=_adam(1e-5))
