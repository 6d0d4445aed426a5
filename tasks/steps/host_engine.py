"""The engine side of a model host: which rank drives the generation engine, building
it as the plan says, and keeping it on the host's policy.

In a data-parallel host rank 0 alone drives the engine(s) — a generate call is sharded
over the run's engines, not over trainer ranks — and the other ranks build none, generate
nothing and send nothing; they still take part in a sync's collectives (ZeRO-3 gathers
every parameter from all ranks). Decisions that need every rank (re-sync an engine that
restarted) are rank 0's, broadcast.

Hybrid engines on every actor GPU (`EnginePlan.per_rank`, OpenRLHF's colocate_all with one
engine per GPU): every rank builds its own in-process engine, samples its contiguous shard
of the prompts (indices and seeds those of the whole batch, so the samples are the ones one
engine would draw), and rank 0 gathers the shards in rank order; every rank syncs its own
engine from the trainer (a ZeRO-3 gather every rank takes part in anyway). Hybrid engines
of tensor parallel > 1 (Ray actors on the GPUs of ranks i*TP..(i+1)*TP-1, driven by rank
0) are synced by every rank: each packs its buckets on its own GPU and shares them, rank 0
passes each engine its ranks' handles (`by_handles`, `vllm_ipc_group`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator

import torch

from alignflow.tasks.distributed import group
from alignflow.tasks.distributed.reduce import from_rank0, gather_lists, global_sum
from alignflow.tasks.engines.base import GeneratedSample
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.engines.vllm import ipc_group
from alignflow.tasks.modeling.loading import DTYPES
from alignflow.tasks.plan.hosts import EngineKind
from alignflow.tasks.steps.rollout_engine import build_vllm
from alignflow.tasks.zoo.registry import resolve_model


def per_rank(host: object) -> bool:
    """Whether every rank of `host` drives an engine of its own (the plan says)."""
    plan = getattr(getattr(host, "spec", None), "plan", None)
    return bool(plan is not None and plan.engine is not None and plan.engine.per_rank)


def shard(host: object, n: int) -> tuple[int, int]:
    """[lo, hi) of the `n` prompts this rank samples: a contiguous share (sizes differing by
    at most one) with per-rank engines, else all of them."""
    rank, size = group.rank_and_size()
    if not per_rank(host) or size == 1:
        return 0, n
    base, extra = divmod(n, size)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + int(rank < extra)


def gathered(host: object, samples: list[GeneratedSample]) -> list[GeneratedSample] | None:
    """Rank 0: every rank's samples in rank order (per-rank engines; else its own); the
    other ranks: None (rank 0 commits the batch)."""
    if per_rank(host):
        samples = gather_lists({"samples": samples})["samples"]
    return samples if group.rank_and_size()[0] == 0 else None


def by_handles(host: object) -> bool:
    """Whether a sync reaches `host`'s engines as handles every rank made (hybrid vLLM
    engines in Ray actors, on the GPUs of its trainer ranks: `vllm_ipc_group`)."""
    plan = getattr(getattr(host, "spec", None), "plan", None)
    engine, actors = getattr(plan, "engine", None), getattr(host.spec, "engines", None)
    return bool(engine is not None and engine.kind == "vllm" and not engine.in_host
                and actors is not None and actors.hybrid)


def in_dtype(named: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype
             ) -> Iterator[tuple[str, torch.Tensor]]:
    """Floating tensors in the engine's dtype before they are packed: a bf16 engine is
    sent bf16 (half the bytes), whatever the trainer holds (a no-op when they agree)."""
    for name, tensor in named:
        yield name, tensor.to(dtype) if tensor.is_floating_point() else tensor


class EngineSide:
    """Mixed into `ModelHost` (which provides `spec`, `actor`, `tokenizer`, `_load_lm` and
    `policy_version`)."""

    @property
    def drives_engine(self) -> bool:
        """Rank 0 of a data-parallel host drives its generation engine (generation is
        sharded over engines, not over trainer ranks); the other ranks build none — unless
        the plan gives every rank an engine of its own (`per_rank`)."""
        return per_rank(self) or group.rank_and_size()[0] == 0

    @functools.cached_property
    def engine(self):
        """The generation engine the plan gives this host (HF, or vLLM in this process or in
        the run's engine actors): its own copy of the policy, synced after each learn."""
        planned = self.spec.plan.engine
        assert planned is not None, f"host {self.spec.plan.name} generates nothing"
        assert self.drives_engine, "this rank of a data-parallel host builds no engine"
        if planned.kind == "vllm":
            return build_vllm(planned, self.spec.engines, resolve_model(self.spec.pretrain),
                              policy_version=0)
        return HFEngine(self._load_lm(self.spec.pretrain, self.spec.dtype), self.tokenizer,
                        micro_rollout_batch_size=self.spec.micro_rollout_batch_size)

    def sync_engine(self) -> None:
        """Weight sync from the trainer: in place (HF, or vLLM in this process), else sent to
        the engine actors in packed buckets. Collective: the other ranks of a group take
        part in the trainer's gathers (ZeRO-3) and send nothing — but to hybrid engine
        actors every rank packs and shares its buckets (`by_handles`)."""
        if by_handles(self):
            self._sync_by_handles()
        elif self.drives_engine:
            named = in_dtype(self.actor.state_dict_for_sync(), DTYPES[self.spec.dtype])
            self.engine.update_weights(named, version=self.policy_version)
        else:
            self.actor.take_part_in_sync()

    def _sync_by_handles(self) -> None:
        """Every rank packs each bucket on its GPU and shares it (`vllm_ipc_group`); rank 0
        sends each engine its ranks' handles, the others follow the rounds."""
        planned = self.spec.plan.engine
        named = in_dtype(self.actor.state_dict_for_sync(), DTYPES[self.spec.dtype])
        rounds = ipc_group.Rounds(named, planned.vllm.sync_bucket_bytes,
                                  ipc_group.pack_device(planned.on_gpu))
        if group.rank_and_size()[0] != 0:
            rounds.follow()
            return
        try:
            self.engine.update_weights(rounds, version=self.policy_version)
        finally:
            rounds.close()  # the others learn how rank 0's sync ended

    @property
    def sampled_by(self) -> EngineKind:
        """The engine kind the run's batches are sampled with (the plan's)."""
        return self.spec.sampled_by

    def ensure_engine_synced(self) -> None:
        """An engine built after training, or restarted after a fault, serves an older
        policy: sync it again (every rank calls it; rank 0 decides for all, since a ZeRO-3
        sync needs every rank)."""
        if "actor" not in self.__dict__:
            return
        behind = self.drives_engine and self.engine.policy_version != self.policy_version
        # per-rank engines: any one behind and all sync (a ZeRO-3 sync's gathers are collective)
        together = global_sum(float(behind)) > 0 if per_rank(self) else from_rank0(behind)
        if together:
            self.sync_engine()

    def engine_idle(self) -> None:
        """Generation is done for this iteration: let a vLLM engine free its GPU memory."""
        planned = self.spec.plan.engine
        sleeps = planned is not None and planned.vllm is not None and \
            planned.vllm.section.enable_sleep
        if sleeps and self.drives_engine:
            self.engine.sleep()
