"""The sections of RL evaluation (`eval.*`, `ckpt.best_metric_key`) and the choice of the
best metric: read by the flow's driver, apart from the evaluation steps (`evaluate.py`) so
that the driver imports no engine or torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from alignflow.errors import require
from alignflow.tasks.steps.ckpt import CkptConfig


@dataclass(frozen=True, kw_only=True)
class RLEvalConfig:
    """Evaluation of the policy on a prompt set of its own (`eval.*`).

    dataset: prompt dataset spec(s) to evaluate on, read as data.* reads prompt_dataset (null: no evaluation)
    split: its split
    steps: evaluate after every N iterations (-1: never)
    temperature: sampling temperature of the evaluation (0: greedy, with n_samples_per_prompt 1)
    n_samples_per_prompt: responses per eval prompt (pass@n: a prompt's best reward)
    at_start: evaluate once before the first iteration too (iteration -1; OpenRLHF does not), when steps >= 1
    """

    dataset: str | None = None
    split: str = "train"
    steps: int = -1
    temperature: float = 0.6
    n_samples_per_prompt: int = 4
    at_start: bool = False

    def __post_init__(self) -> None:
        require(self.steps == -1 or self.steps >= 1, "steps", "an integer >= 1, or -1",
                self.steps)
        require(math.isfinite(self.temperature) and self.temperature >= 0, "temperature",
                "a finite float >= 0", self.temperature)
        require(self.n_samples_per_prompt >= 1, "n_samples_per_prompt", "an integer >= 1",
                self.n_samples_per_prompt)

    def notes(self, train_dataset: str, train_split: str | None) -> list[str]:
        """A `note:` where the evaluation reads the very prompts the run trains on: the same
        data set and split (`eval.split` defaults to train, as OpenRLHF's `--eval_split`)."""
        if self.dataset is None or self.dataset != train_dataset or self.split != train_split:
            return []
        return [f"eval.split={self.split}: evaluation reads the prompts training reads "
                f"({self.dataset}); a held-out split is e.g. --eval_split test (the "
                "alignflow:arith and alignflow:countdown sets hold one)"]

    def due(self, done: int) -> bool:
        """Whether an evaluation follows iteration `done` (1-based), as OpenRLHF's
        `global_step % eval_steps == 0`."""
        return self.dataset is not None and self.steps > 0 and done % self.steps == 0

    @property
    def at_start_due(self) -> bool:
        """Whether the untrained policy is evaluated first (the curve's starting point)."""
        return self.dataset is not None and self.steps > 0 and self.at_start


@dataclass(frozen=True, kw_only=True)
class RLCkptConfig(CkptConfig):
    """An RL run's checkpoint keys, with the best evaluation's export."""

    best_metric_key: str = field(default="", metadata={
        "help": "the eval metric whose best value so far keeps an HF export of the policy "
                "(runs/<id>/final/best): OpenRLHF's name (eval_<source>_pass1) or "
                "alignflow's (eval/<source>/pass1); empty: the first *pass1 metric; none: "
                "no best export"})


def best_key(given: str, metrics: dict[str, float]) -> str | None:
    """The metric `ckpt.best_metric_key` names in `metrics` (alignflow's names), as
    OpenRLHF detects it: none: None; a name: it (in either spelling) if measured; empty:
    the first metric ending in _pass1 in OpenRLHF's sorted names."""
    if given == "none":
        return None
    spelled = {"eval_" + k[len("eval/"):].replace("/", "_"): k for k in metrics}
    if given:
        return given if given in metrics else spelled.get(given)
    return next((spelled[k] for k in sorted(spelled) if k.endswith("_pass1")), None)
