"""The live-logging sink of a driver: after each commit it logs what the committed files
hold (`points.py`) to TensorBoard and W&B. Tasks stay pure, and a replayed task is not
logged again because it is not committed again.

A cursor (`runs/<id>/logger.json`: the last logged commit `seq` and the W&B run id) is
written after each logged commit; a resumed driver first logs the commits after it, so a
driver killed between a commit and its logging leaves no step missing. A logging failure
is reported once on stderr and never fails the run.
"""

from __future__ import annotations

import secrets
import sys
from typing import Any

from alignflow.artifacts.redact import redact_tree
from alignflow.artifacts.store import Store
from alignflow.flows.config.lookup import value_at
from alignflow.flows.tracking.config import LoggerConfig
from alignflow.flows.tracking.points import points


def logger_path(run_id: str) -> str:
    return f"runs/{run_id}/logger.json"


def logger_config(config: Any) -> LoggerConfig | None:
    """The run config's `logger` section, when it turns some logging on."""
    section = value_at(config, "logger")
    if isinstance(section, dict):
        from alignflow.flows.config import from_dict

        section = from_dict(LoggerConfig, section)
    return section if isinstance(section, LoggerConfig) and section.enabled else None


class LiveLog:
    """Logs each committed manifest of one run to the configured writers."""

    def __init__(self, store: Store, run_id: str, cfg: LoggerConfig, config: Any) -> None:
        self.store, self.run_id, self.cfg = store, run_id, cfg
        rel = logger_path(run_id)
        self.state: dict = store.read_json(rel) if store.exists(rel) else {"seq": 0}
        self.state.setdefault("wandb_id", secrets.token_hex(4))
        self.writers: list[Any] = []
        self.failed = False
        if cfg.tensorboard_dir:
            from alignflow.flows.tracking.tensorboard import TensorBoardWriter

            # the folder the trust check confirmed, resolved as it is opened (locations.py)
            folder = store.local_folder(f"{cfg.tensorboard_dir.rstrip('/')}/{run_id}")
            self.writers.append(TensorBoardWriter(folder))
        if cfg.wandb.enabled:
            from alignflow.flows.config import to_dict
            from alignflow.flows.tracking.wandb_writer import WandbWriter

            plain = to_dict(config) if not isinstance(config, dict) else config
            masked = redact_tree(plain)  # a dict, as `plain` is
            self.writers.append(WandbWriter(cfg.wandb, run_id, self.state["wandb_id"],
                                            masked if isinstance(masked, dict) else {}))

    def catch_up(self, journal: dict[str, dict]) -> None:
        """Log the commits a killed driver committed but did not log."""
        for manifest in sorted(journal.values(), key=lambda m: m.get("seq", 0)):
            if manifest.get("seq", 0) > self.state["seq"]:
                self.committed(manifest, journal)

    def committed(self, manifest: dict, journal: dict[str, dict]) -> None:
        if self.failed:
            return
        try:
            found = points(self.store, manifest, journal, self.cfg.logging_steps,
                           self.cfg.sample_rows)
            if not (found.scalars or found.samples):
                return  # nothing to log: the cursor may stay behind (catch-up logs nothing)
            for writer in self.writers:
                writer.write(found.scalars, found.samples)
            self.state["seq"] = max(self.state["seq"], manifest.get("seq", 0))
            self.store.write_json(logger_path(self.run_id), self.state)
        except Exception as exc:  # logging must never fail the run
            self.failed = True
            print(f"alignflow: live logging of run {self.run_id} stopped: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)

    def close(self) -> None:
        for writer in self.writers:
            try:
                writer.close()
            except Exception as exc:
                print(f"alignflow: closing a logger of run {self.run_id}: {exc}", file=sys.stderr)


def open_sink(state: Any, config: Any, driver: Any) -> LiveLog | None:
    """Live metrics (TensorBoard, W&B) from each commit of `driver`, when the config's
    `logger` asks; the run's committed tasks first."""
    cfg = logger_config(config)
    if cfg is None:
        return None
    sink = LiveLog(state.store, state.run_id, cfg, config)
    sink.catch_up(driver.manifests)
    driver.listeners.append(lambda manifest: sink.committed(manifest, driver.manifests))
    return sink
