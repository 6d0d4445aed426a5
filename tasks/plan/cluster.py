"""The resources a run is planned for: nodes × GPUs per node, and CPUs per node.

`Cluster.local()` is this machine, found without importing torch (the CLI plans before Ray
starts); `Cluster.current()` is the Ray cluster this process has joined, else this machine.
A plan can be made for a cluster one does not have (tests; later `--cluster 2x8`).
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass

from alignflow.artifacts.journal import journal_record
from alignflow.errors import ConfigError


@journal_record
@dataclass(frozen=True, kw_only=True)
class Cluster:
    """nodes × gpus_per_node GPUs; cpus_per_node CPUs on each node."""

    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_node: float = 1.0

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 0 or self.cpus_per_node <= 0:
            raise ConfigError(f"cluster {self.nodes} node(s) × {self.gpus_per_node} GPU(s), "
                              f"{self.cpus_per_node:g} CPU(s) per node: expected nodes >= 1, "
                              "GPUs >= 0 and CPUs > 0")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def describe(self) -> str:
        return (f"{self.nodes} node(s) × {self.gpus_per_node} GPU(s), "
                f"{self.cpus_per_node:g} CPU(s) per node")

    @classmethod
    def local(cls) -> Cluster:
        """This machine: the NVIDIA devices this process may use, and its CPUs."""
        return cls(gpus_per_node=visible_gpus(), cpus_per_node=float(os.cpu_count() or 1))

    @classmethod
    def current(cls) -> Cluster:
        """The Ray cluster this process has joined (its alive nodes), else this machine."""
        ray = sys.modules.get("ray")
        if ray is None or not ray.is_initialized():
            return cls.local()
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        if not nodes:
            return cls.local()
        return cls(nodes=len(nodes), gpus_per_node=int(max(n.get("GPU", 0) for n in nodes)),
                   cpus_per_node=max(max(n.get("CPU", 0) for n in nodes), 1.0))


def visible_gpus() -> int:
    """NVIDIA devices this process may use, counted without importing torch (an empty or
    -1 `CUDA_VISIBLE_DEVICES` hides them all; a list narrows them)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    found = len(_listdir("/proc/driver/nvidia/gpus")) or len(glob.glob("/dev/nvidia[0-9]*"))
    if visible is not None and found:
        return min(found, len([v for v in visible.split(",") if v.strip()]))
    return found


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
