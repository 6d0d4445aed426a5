"""The `ckpt` section every family shares (OpenRLHF 0.11's `ckpt.*`): how often a run
writes what it can resume from or export, and how many checkpoints it keeps."""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.errors import require


@dataclass(frozen=True, kw_only=True)
class CkptConfig:
    """Checkpoint cadence and retention."""

    save_steps: int = field(default=-1, metadata={
        "help": "RL: also export an HF folder every N iterations (every iteration is "
                "checkpointed anyway); offline and loops: optimizer steps per checkpointed "
                "train task. -1: RL exports at the end only; offline trains in one task, a "
                "loop in one task per round"})
    max_num: int = field(default=2, metadata={
        "help": "resume checkpoints kept per trained role (older ones are deleted; >= 2)"})

    def __post_init__(self) -> None:
        require(self.save_steps == -1 or self.save_steps >= 1, "save_steps",
                "an integer >= 1, or -1", self.save_steps)
        require(self.max_num >= 2, "max_num", "an integer >= 2 (the newest checkpoint is "
                "committed only when its task ends, so the one before is kept)", self.max_num)
