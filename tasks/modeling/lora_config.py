"""The LoRA section of a config, apart from the adapter code (`lora.py`): a driver checks and
plans a run without importing torch or peft. Journalled under its old name
(`alignflow.tasks.modeling.lora:LoraConfig`), so runs recorded before the move resume."""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.errors import require


@dataclass(frozen=True, kw_only=True)
class LoraConfig:
    """LoRA adapters (peft) on a frozen base model (OpenRLHF's `ds.lora.*`).

    rank: adapter rank r; 0 = full fine-tuning (no adapters)
    alpha: scale numerator (the update is alpha/rank · B·A)
    dropout: dropout on the adapters' input
    target_modules: module names (suffixes) to adapt, or all-linear
    """

    rank: int = 0
    alpha: int = 16
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("all-linear",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_modules", tuple(self.target_modules))
        require(self.rank >= 0, "rank", "an integer >= 0 (0: no LoRA)", self.rank)
        require(self.alpha > 0, "alpha", "a number > 0", self.alpha)
        require(0.0 <= self.dropout < 1.0, "dropout", "a float in [0, 1)", self.dropout)
        require(len(self.target_modules) > 0, "target_modules", "at least one module name",
                self.target_modules)

    @property
    def enabled(self) -> bool:
        return self.rank > 0


LoraConfig.__module__ = "alignflow.tasks.modeling.lora"  # its journal name (`flows/journal/codec.py`)
