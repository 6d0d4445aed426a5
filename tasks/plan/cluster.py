"""The resources a run is planned for: nodes × GPUs per node, and CPUs per node.

`Cluster.local()` is this machine, found without importing torch (the CLI plans before Ray
starts); `Cluster.current()` is the Ray cluster this process has joined, else this machine;
`Cluster.parse("2x8")` is a cluster one does not have (`--cluster 2x8`: its CPUs are not
counted unless given, `2x8:96`). A simulated cluster (`--simulate-cluster`, fake GPUs on
this machine: `tasks/simulate/`) is marked as such, so its plan and run.json say so.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass

from alignflow.artifacts.journal import journal_record
from alignflow.errors import ConfigError
from alignflow.tasks.simulate.node import LABEL as SIMULATED_LABEL

SPEC = re.compile(r"^\s*(\d+)\s*[x×]\s*(\d+)\s*(?::\s*(\d+(?:\.\d+)?)\s*)?$")
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(TB|TiB|T|GB|GiB|G|MB|MiB|M)?\s*$", re.IGNORECASE)
SIZE_UNITS = {"t": 1 << 40, "g": 1 << 30, "m": 1 << 20}


@journal_record
@dataclass(frozen=True, kw_only=True)
class Cluster:
    """nodes × gpus_per_node GPUs; cpus_per_node CPUs on each node (None: not counted, for a
    cluster described only by its GPUs); `simulated`: fake GPUs on this machine;
    `described`: named on the command line (`--cluster`), not found."""

    nodes: int = 1
    gpus_per_node: int = 0
    cpus_per_node: float | None = 1.0
    simulated: bool = False
    described: bool = False
    gpu_memory: int | None = None  # bytes per GPU (`--gpu-memory`; None: not given)

    @property
    def vllm_assumed(self) -> bool:
        """Plan its GPU nodes with vLLM installed, whatever this process has: a cluster
        described or simulated stands for GPU nodes with the `vllm` extra (a simulated run
        without vLLM samples with its HF stand-in, `tasks/engines/standin.py`)."""
        return self.described or self.simulated

    def __post_init__(self) -> None:
        cpus_ok = self.cpus_per_node is None or self.cpus_per_node > 0
        if self.nodes < 1 or self.gpus_per_node < 0 or not cpus_ok:
            raise ConfigError(f"cluster {self.nodes} node(s) × {self.gpus_per_node} GPU(s), "
                              f"{self.cpus_per_node} CPU(s) per node: expected nodes >= 1, "
                              "GPUs >= 0 and CPUs > 0")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def spec(self) -> str:
        """The cluster as `--cluster` spells it: `2x8`, or `2x8:96` with CPUs counted."""
        cpus = "" if self.cpus_per_node is None else f":{self.cpus_per_node:g}"
        return f"{self.nodes}x{self.gpus_per_node}{cpus}"

    def describe(self) -> str:
        cpus = "CPUs not counted" if self.cpus_per_node is None else \
            f"{self.cpus_per_node:g} CPU(s) per node"
        where = " (simulated on this machine: fake GPUs)" if self.simulated else ""
        return f"{self.nodes} node(s) × {self.gpus_per_node} GPU(s), {cpus}{where}"

    @classmethod
    def parse(cls, text: str, *, simulated: bool = False) -> Cluster:
        """`NxG` (N nodes × G GPUs per node) or `NxG:C` (and C CPUs per node)."""
        found = SPEC.match(text)
        if not found:
            raise ConfigError(f"cluster {text!r}: expected NODESxGPUS (e.g. 2x8: 2 nodes of "
                              "8 GPUs), optionally :CPUS per node (2x8:96)")
        nodes, gpus, cpus = found.groups()
        return cls(nodes=int(nodes), gpus_per_node=int(gpus),
                   cpus_per_node=float(cpus) if cpus else None, simulated=simulated,
                   described=not simulated)

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
        return of_nodes([n for n in ray.nodes() if n.get("Alive")]) or cls.local()


def parse_size(text: str) -> int:
    """`--gpu-memory`'s size in bytes: `80GB`, `80G`, `80GiB` or `80` are 80 GiB (a GPU's
    "80GB" is 80 GiB of memory: an H100 80GB shows torch 79.2 GiB, bench/RESULTS.md),
    `141GB`, `24576MiB`, `0.5TB`."""
    found = SIZE.match(text)
    if not found or float(found.group(1)) <= 0:
        raise ConfigError(f"--gpu-memory {text!r}: expected a size per GPU such as 80GB, "
                          "40GB, 141GB or 24576MiB")
    unit = (found.group(2) or "g")[0].lower()
    return int(float(found.group(1)) * SIZE_UNITS[unit])


def of_nodes(nodes: list[dict]) -> Cluster | None:
    """A cluster of Ray nodes (as `ray.nodes()` lists them). Only nodes with GPUs count
    when some have them (a CPU-only head schedules no GPU worker); a mixed cluster is
    planned for its smallest GPU node, so the plan never claims room that is not there."""
    if not nodes:
        return None
    gpu_nodes = [n for n in nodes if n.get("Resources", {}).get("GPU", 0) > 0]
    counted = gpu_nodes or nodes
    res = [n.get("Resources", {}) for n in counted]
    simulated = all(SIMULATED_LABEL in (n.get("Labels") or {}) for n in nodes)
    return Cluster(nodes=len(counted), gpus_per_node=int(min(r.get("GPU", 0) for r in res)),
                   cpus_per_node=max(min(r.get("CPU", 0) for r in res), 1.0),
                   simulated=simulated)


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
