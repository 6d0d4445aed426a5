"""The model sections of the training flows, under OpenRLHF 0.11's names.

`model.*` is what the offline flows and the loops train (`model.model_name_or_path`, as
train_sft / train_dpo); `ref.*` a frozen reference model, `teacher.*` a distillation
teacher. RL flows name their trained models by role instead (`actor.*`, `critic.*`;
`tasks/rl/roles.py`). A model is an HF hub name, a local folder or a prepared offline
name (`smollm2-135m`, `tiny-llama`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The model to train.

    model_name_or_path: HF name, local folder or offline name
    gradient_checkpointing_enable: recompute activations in backward (less memory, ~30% slower)
    """

    model_name_or_path: str = "smollm2-135m"
    gradient_checkpointing_enable: bool = False


@dataclass(frozen=True, kw_only=True)
class SFTModelConfig(ModelConfig):
    """The model to fine-tune, and whether every token is a label."""

    pretrain_mode_enable: bool = field(default=False, metadata={
        "help": "loss on every token of the text (continued pretraining), not only replies"})


@dataclass(frozen=True, kw_only=True)
class RefConfig:
    """The frozen reference model.

    model_name_or_path: default: the trained model's starting point
    offload: park its weights on disk between uses (RL: between iterations)
    """

    model_name_or_path: str | None = None
    offload: bool = False


@dataclass(frozen=True, kw_only=True)
class TeacherConfig:
    """The distillation teacher (OpenRLHF 0.9's --teacher_model).

    model_name_or_path: HF name, local folder or offline name of the teacher (offline distill: its logits; on_policy_distill: its log-probs of the student's tokens)
    """

    model_name_or_path: str | None = None
