"""The `logger` section: live metrics to TensorBoard and Weights & Biases (OpenRLHF 0.11's
names: `logger.tensorboard_dir`, `logger.wandb.*`, `logger.logging_steps`; the v0.9 flags
`--use_tensorboard`, `--use_wandb`, `--wandb_project`, ... are aliases)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from alignflow.artifacts.redact import register_secret
from alignflow.errors import require

_ON = ("true", "1", "yes", "on")
_OFF = ("", "false", "0", "no", "off", "none")


@dataclass(frozen=True, kw_only=True)
class WandbConfig:
    """key: W&B API key or 'true' (already logged in / WANDB_MODE=offline); setting it turns
    W&B on. A key is used by this process only: never stored with the run nor put in the
    environment.
    org: W&B entity
    group: W&B group
    project: W&B project
    run_name: W&B run name (default: the run id)
    """

    key: str | None = None
    org: str | None = None
    group: str | None = None
    project: str = "alignflow"
    run_name: str | None = None

    def __post_init__(self) -> None:
        key = self.key
        if key is not None and key.strip().lower() not in _ON + _OFF:
            register_secret("WANDB_API_KEY", key)  # out of every text written
            object.__setattr__(self, "_api_key", key)  # not a field: never encoded
            object.__setattr__(self, "key", "true")

    @property
    def enabled(self) -> bool:
        return self.key is not None and self.key.strip().lower() not in _OFF

    @property
    def api_key(self) -> str | None:
        """The key given to this process (None: W&B's own login or $WANDB_API_KEY)."""
        return getattr(self, "_api_key", None)


def holds_key(value: object) -> bool:
    """Is a `logger.wandb.key` value a key (not on/off)? A stored config never holds one."""
    return isinstance(value, str) and value.strip().lower() not in _ON + _OFF


def wandb_url() -> str:
    """Where W&B sends a run's metrics and samples: the server a resume must confirm."""
    return os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"


@dataclass(frozen=True, kw_only=True)
class LoggerConfig:
    """tensorboard_dir: TensorBoard folder (the run logs to <dir>/<run id>); setting it turns
    TensorBoard on
    logging_steps: log metrics of every N-th step (and iteration) only
    sample_rows: samples (prompt, response, reward) logged per iteration
    """

    tensorboard_dir: str | None = field(default=None, metadata={"refers": "write_dir"})
    logging_steps: int = 1
    sample_rows: int = 8
    wandb: WandbConfig = field(default_factory=WandbConfig)

    def __post_init__(self) -> None:
        require(self.logging_steps >= 1, "logging_steps", "an integer >= 1", self.logging_steps)
        require(self.sample_rows >= 0, "sample_rows", "an integer >= 0", self.sample_rows)

    @property
    def enabled(self) -> bool:
        return bool(self.tensorboard_dir) or self.wandb.enabled

    def references(self) -> list[tuple[str, str, str]]:
        """W&B is an outside effect: the run's data goes to its server (`flows/config/refs.py`)."""
        return [("wandb.key", "url", wandb_url())] if self.wandb.enabled else []

