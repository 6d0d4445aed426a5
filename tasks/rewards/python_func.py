"""Custom Python reward functions, OpenRLHF style: a file defining
`reward_func(queries, prompts, labels)`.

The function may return a tensor or list of N floats, or a dict with `rewards` (required),
`scores` (N floats as in OpenRLHF, or name -> N floats) and `extra_logs` (name -> N
floats per sample, or one number: a metric of the batch, as OpenRLHF's own
`examples/python/math_reward_func.py` returns its accuracy). Everything it returns is
checked (length, numbers, finite) and a fault names the file. The function runs in a child
process with a time budget per call (`sandbox.py`): a hang or a crash fails the run in one
line, never the process driving it. The file loads through the one loader of user files
(`artifacts/usercode.py:load_attr`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from alignflow.errors import ConfigError
from alignflow.tasks.rewards.base import (
    RewardOutput,
    check_batch,
    split_logs,
    to_vector,
    to_vectors,
)
from alignflow.tasks.rewards.sandbox import ChildFunc

FUNC_NAME = "reward_func"
DEFAULT_TIMEOUT = 300.0  # seconds one call may take (reward.func_timeout)


def _scores(values: object, n: int, where: str) -> dict:
    """OpenRLHF's `scores` is one vector (0-1, for dynamic filtering): kept as 'score'."""
    if values is None or isinstance(values, Mapping):
        return to_vectors(values, n, what="scores", where=where)
    return {"score": to_vector(values, n, what="scores", where=where)}


class PythonRewardFunc:
    """A RewardSource around a user's `reward_func` file, called in a child process with a
    time budget per call (`sandbox.py`); the file must be allowed (`artifacts/usercode.py`)."""

    def __init__(self, path: str | Path, func_name: str = FUNC_NAME,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = Path(path).expanduser().resolve()
        self.func_name, self.timeout = func_name, timeout
        if not self.path.is_file():
            raise ConfigError(f"reward function file {self.path} not found; expected a .py "
                              f"file defining {func_name}(queries, prompts, labels)")
        self._func = ChildFunc(self.path, func_name, timeout)
        self._func.start()

    def __getstate__(self) -> dict:  # ship to Ray workers by path, not by pickled code
        return {"path": self.path, "func_name": self.func_name, "timeout": self.timeout}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["func_name"], state.get("timeout", DEFAULT_TIMEOUT))

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        out = self._func(list(queries), list(prompts), list(labels))
        return self._validate(out, len(queries))

    def _validate(self, out: object, n: int) -> RewardOutput:
        where = f"{self.func_name} in {self.path.name}"
        if not isinstance(out, Mapping):
            return RewardOutput(to_vector(out, n, what="rewards", where=where))
        if "rewards" not in out:
            raise ConfigError(f"{where} returned a dict without 'rewards' (keys: "
                              f"{sorted(map(str, out))}); expected {{'rewards': [...], ...}}")
        per_sample, batch = split_logs(out.get("extra_logs"), n, where=where)
        return RewardOutput(to_vector(out["rewards"], n, what="rewards", where=where),
                            _scores(out.get("scores"), n, where), per_sample, batch)
