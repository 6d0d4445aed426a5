"""The host interface: what the steps ask of the object a worker group holds.

A step takes its host as its first argument (`@task(worker=...)`) and names the part of
this interface it uses. Five classes implement parts of it:

| class | parts |
|---|---|
| `steps.host.ModelHost` (RL roles, the loops' policy) | all but `Sampler` and `Teacher` |
| `offline.host.OfflineHost` (offline training) | `Host`, `Trained` |
| `rl.rollout_host.RolloutHost` (the generator worker) | `Host`, `Sampler` |
| `offline.host.TeacherHost` (distillation) | `Host`, `Teacher` |
| `flows/campaign/evaluation.EvalHost` (a campaign's gate, one evaluation) | `Generator`, `Scorer` |
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from torch import nn

from alignflow.tasks.engines.base import GenerationEngine
from alignflow.tasks.trainers.base import Trainer

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store


class Host(Protocol):
    """What the flow engine calls: `restore` before a resumed group's first live task, with
    the newest checkpoint its tasks committed (`preload`, when a host has it, at start)."""

    def restore(self, store: Store, folder: str) -> None: ...


class Generator(Protocol):
    """Samples with the policy it serves (the generate step)."""

    @property
    def tokenizer(self) -> Any: ...

    @property
    def engine(self) -> GenerationEngine: ...

    def ensure_engine_synced(self) -> None:
        """Bring an engine restarted after a fault back to the host's policy."""

    def engine_idle(self) -> None:
        """Generation is done for now: an engine may free its memory."""


class Scorer(Protocol):
    """Scores rollouts with the run's reward sources (the score step)."""

    @property
    def reward(self) -> Any: ...

    def idle(self, role: str) -> None:
        """A step is done with `role` for now: offload it if configured."""


class Trained(Protocol):
    """Holds a trainer between tasks (train, export, the offline reference)."""

    @property
    def tokenizer(self) -> Any: ...

    @property
    def trainer(self) -> Trainer: ...

    def memo(self, key: Hashable, build: Callable[[], Any]) -> Any: ...

    def save(self, store: Store, folder: str) -> str:
        """Checkpoint into `folder` (in the background); returns the folder."""


class Synced(Generator, Protocol):
    """An engine that follows a trainer (the sync step)."""

    policy_version: int

    def sync_engine(self) -> None: ...

    def settle(self) -> None:
        """Wait until the checkpoints being written are in the store."""


class RLHost(Trained, Synced, Scorer, Protocol):
    """The RL roles' host (learn, reference, values): actor, critic, reference policy."""

    @property
    def actor(self) -> Trainer: ...

    @property
    def critic(self) -> Trainer: ...

    @property
    def ema(self) -> Any:
        """The policy's moving average (`trainers/ema.py`), or None (train.enable_ema off)."""

    @property
    def sampled_by(self) -> str:
        """The engine kind ("hf" | "vllm") the run's batches are sampled with."""

    def reference_model(self) -> AbstractContextManager[nn.Module]: ...

    def wake(self, role: str) -> None: ...


class Sampler(Protocol):
    """The generator worker: an engine switched to the policy each task names."""

    @property
    def tokenizer(self) -> Any: ...

    @property
    def engine(self) -> GenerationEngine: ...

    @property
    def agent(self) -> Any: ...

    def use_policy(self, store: Store, policy: Any) -> None: ...


class Teacher(Protocol):
    """The frozen distillation teacher."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def pad_id(self) -> int: ...
