"""Loading an OpenRLHF agent file (`--agent_func_path`): a `.py` file defining
`AgentExecutor`, built with no arguments, as OpenRLHF builds it.

Such a file imports `openrlhf.utils.agent`; while it is imported, that name resolves to
alignflow's implementation of the same API (`tasks/agents/api.py`), whether or not
OpenRLHF is installed, so the file runs unchanged. Like a reward function file, an agent
file named in a stored config is imported on resume only from a trusted place
(`flows/trust/`, through `artifacts/usercode.py`).
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

from alignflow.artifacts import usercode
from alignflow.tasks.agents import api
from alignflow.tasks.agents.guard import AgentError

SHIMS = ("openrlhf", "openrlhf.utils", "openrlhf.utils.agent")


def _shim_modules() -> dict[str, types.ModuleType]:
    root, utils = types.ModuleType("openrlhf"), types.ModuleType("openrlhf.utils")
    root.utils, utils.agent = utils, api  # type: ignore[attr-defined]
    root.__path__, utils.__path__ = [], []  # packages, so submodule imports resolve here
    return {"openrlhf": root, "openrlhf.utils": utils, "openrlhf.utils.agent": api}


def _executor_class(path: Path) -> Any:
    """The agent file's `AgentExecutor`, through the one loader of user files (only if this
    process allows the file: `artifacts/usercode.py`), while `openrlhf.utils.agent`
    resolves to alignflow's implementation."""
    try:
        return usercode.load_attr(path, "AgentExecutor", kind="agent", what="agent file",
                                  names=_shim_modules())
    except usercode.UntrustedCode:
        raise
    except Exception as exc:
        raise AgentError(f"importing agent file {path} failed: {type(exc).__name__}: "
                         f"{exc}") from exc


def load_agent_executor(path: str | Path, *, max_turns: int = 4,
                        step_timeout: float = 60.0) -> api.AgentExecutorBase:
    """The file's `AgentExecutor()`; a multi-turn executor gets the episode limits."""
    path = Path(path).expanduser().resolve()
    if path.suffix != ".py" or not path.is_file():
        raise AgentError(f"agent file {path} not found; expected a .py file defining "
                         "AgentExecutor (OpenRLHF's agent API)")
    cls = _executor_class(path)
    if not (isinstance(cls, type) and issubclass(cls, api.AgentExecutorBase)):
        raise AgentError(f"agent file {path} defines no class AgentExecutor subclassing "
                         "AgentExecutorBase (from openrlhf.utils.agent)")
    try:
        executor = cls()
    except AgentError:
        raise
    except Exception as exc:
        raise AgentError(f"agent file {path}: AgentExecutor() raised {type(exc).__name__}: "
                         f"{exc}") from exc
    if isinstance(executor, api.MultiTurnAgentExecutor):
        executor.max_turns, executor.step_timeout = max_turns, step_timeout
    return executor
