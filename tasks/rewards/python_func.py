"""Custom Python reward functions, OpenRLHF style: a file defining
`reward_func(queries, prompts, labels)`.

The function may return a tensor or list of N floats, or a dict with `rewards` (required),
`scores` (N floats as in OpenRLHF, or name -> N floats) and `extra_logs` (name -> N
floats per sample, or one number: a metric of the batch, as OpenRLHF's own
`examples/python/math_reward_func.py` returns its accuracy). Everything it returns is checked (length, numbers, finite) and a fault names the
file. Each path is imported under its own module
name, so two files both called `reward.py` do not clash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path

from alignflow.artifacts import usercode
from alignflow.errors import ConfigError
from alignflow.tasks.rewards.base import (
    RewardOutput,
    check_batch,
    split_logs,
    to_vector,
    to_vectors,
)

FUNC_NAME = "reward_func"


def _module_name(path: Path) -> str:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    return f"alignflow_reward_{path.stem}_{digest}"


def load_reward_func(path: str | Path, func_name: str = FUNC_NAME) -> Callable:
    """Import `path` (only if this process allows it: `artifacts/usercode.py`) and return
    its `func_name`; one-line ConfigError if either is missing."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"reward function file {path} not found; expected a .py file "
                          f"defining {func_name}(queries, prompts, labels)")
    try:
        module = usercode.load_file(path, module_name=_module_name(path),
                                    what="reward function file")
    except usercode.UntrustedCode:
        raise
    except Exception as exc:
        raise ConfigError(f"importing reward function file {path} failed: "
                          f"{type(exc).__name__}: {exc}") from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ConfigError(f"reward function file {path} defines no function {func_name!r}; "
                          f"expected def {func_name}(queries, prompts, labels)")
    return func


def _scores(values: object, n: int, where: str) -> dict:
    """OpenRLHF's `scores` is one vector (0-1, for dynamic filtering): kept as 'score'."""
    if values is None or isinstance(values, Mapping):
        return to_vectors(values, n, what="scores", where=where)
    return {"score": to_vector(values, n, what="scores", where=where)}


class PythonRewardFunc:
    """A RewardSource around a user's `reward_func` file."""

    def __init__(self, path: str | Path, func_name: str = FUNC_NAME) -> None:
        self.path = Path(path)
        self.func_name = func_name
        self._func = load_reward_func(path, func_name)

    def __getstate__(self) -> dict:  # ship to Ray workers by path, not by pickled code
        return {"path": self.path, "func_name": self.func_name}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["func_name"])

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
