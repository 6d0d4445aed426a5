"""The `ckpt` section every family shares (OpenRLHF 0.11's `ckpt.*`): how often a run
writes what it can resume from or export, how many checkpoints it keeps, and where the
final model is copied. alignflow checkpoints into the store; `path` and `load_enable` keep
OpenRLHF's "run the script again to resume" (the run id is taken from `path`)."""

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
    max_num: int = field(default=3, metadata={
        "help": "resume checkpoints kept per trained role (older ones are deleted; 1 keeps "
                "the one before the newest too, as the last committed one)"})
    save_hf: bool = field(default=False, metadata={
        "help": "also write an HF folder at each save (RL: the save_steps exports; offline: "
                "after each train task)"})
    output_dir: str | None = field(default=None, metadata={
        "help": "copy the final HF folder here too (it is always in the store)",
        "refers": "write_dir"})
    path: str | None = field(default=None, metadata={
        "help": "names the run for load_enable (checkpoints themselves live in the store)"})
    load_enable: bool = field(default=False, metadata={
        "help": "started again, resume the run named by ckpt.path (or --run-id) if it exists"})

    def hf_export_due(self, done: int, total: int) -> bool:
        """RL: whether an HF export follows iteration `done` (1-based) of `total` (the
        final one is exported anyway)."""
        return self.save_hf and self.save_steps > 0 and done % self.save_steps == 0 \
            and done < total

    def __post_init__(self) -> None:
        require(self.save_steps == -1 or self.save_steps >= 1, "save_steps",
                "an integer >= 1, or -1", self.save_steps)
        require(self.max_num >= 1, "max_num", "an integer >= 1", self.max_num)
