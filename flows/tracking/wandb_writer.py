"""Weights & Biases, when installed (`pip install alignflow[wandb]`): one W&B run per
alignflow run. Its id is kept with the run (`runs/<id>/logger.json`), so a resumed run
continues the same W&B run instead of starting a new one. Metrics rows are plotted
against `global_step`, rollout statistics and sample tables against `iteration`.
"""

from __future__ import annotations

import sys
from typing import Any

from alignflow.artifacts.redact import redact
from alignflow.errors import ConfigError
from alignflow.flows.tracking.config import WandbConfig
from alignflow.flows.tracking.points import Samples, Scalar

_AXES = {"step": "global_step", "iteration": "iteration"}


class WandbWriter:
    def __init__(self, cfg: WandbConfig, run_id: str, wandb_id: str, config: dict) -> None:
        try:
            import wandb
        except ImportError:
            raise ConfigError("logger.wandb.key (--use_wandb) is set but wandb is not "
                              "installed; pip install 'alignflow[wandb]'") from None
        self.wandb = wandb
        argv = sys.argv
        sys.argv = [redact(a) or a for a in argv]  # W&B records the command line
        try:
            settings = wandb.Settings(api_key=cfg.api_key) if cfg.api_key else None
            self.run = wandb.init(project=cfg.project, entity=cfg.org, group=cfg.group,
                                  name=cfg.run_name or run_id, id=wandb_id, resume="allow",
                                  config=config, settings=settings)
        finally:
            sys.argv = argv
        self.defined: set[str] = set()
        for axis in _AXES.values():
            self.run.define_metric(axis, hidden=True)

    def _define(self, key: str, axis: str) -> None:
        if key not in self.defined:
            self.run.define_metric(key, step_metric=_AXES[axis])
            self.defined.add(key)

    def write(self, scalars: list[Scalar], samples: list[Samples]) -> None:
        by_point: dict[tuple[str, int], dict[str, Any]] = {}
        for s in scalars:
            self._define(s.key, s.axis)
            by_point.setdefault((s.axis, s.step), {})[s.key] = s.value
        for t in samples:
            self._define(t.key, "iteration")
            table = self.wandb.Table(columns=[*t.columns, "sql"],
                                     data=[[*row, t.sql] for row in t.rows])
            by_point.setdefault(("iteration", t.step), {})[t.key] = table
        for (axis, step), values in by_point.items():
            self.run.log({**values, _AXES[axis]: step})

    def close(self) -> None:
        self.run.finish()
