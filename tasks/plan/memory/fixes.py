"""The flags that would make an oversized GPU fit, each tried alone on the plan: a higher
ZeRO stage, Adam offload, parking the reference/reward off the GPU, gradient checkpointing,
smaller micro-batches, a smaller or sleeping vLLM share. Each family of changes is tried
from the mildest and named by the first value that fits."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from alignflow.errors import ConfigError
from alignflow.tasks.plan.hosts import HostPlan, TrainerPlan
from alignflow.tasks.plan.memory import engine
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.layout import gpu_sets
from alignflow.tasks.plan.memory.peaks import gpu_peak
from alignflow.tasks.plan.records import RunPlan

Candidate = tuple[str, RunPlan, MemoryAsk]


def fixes(name: str, plan: RunPlan, ask: MemoryAsk, total: float) -> list[str]:
    """Every family's mildest single change that makes the GPUs called `name` fit."""
    found = []
    for family in _families(plan, ask):
        fit = next((label for label, p, a in family() if _fits(name, p, a, total)), None)
        if fit is not None:
            found.append(fit)
    return found


def _fits(name: str, plan: RunPlan, ask: MemoryAsk, total: float) -> bool:
    for gpus in gpu_sets(plan):
        if gpus.name == name:
            peak, eng = gpu_peak(gpus, plan, ask, total)
            shape = ask.model("actor") or ask.model("model")
            starts = eng is None or gpus.vllm is None or shape is None or \
                eng.sequences(engine.engine_seq_len(shape, gpus.vllm, ask.seq_len)) >= 1
            return peak.peak <= total and starts
    return False


def _families(plan: RunPlan, ask: MemoryAsk) -> list[Callable[[], Iterator[Candidate]]]:
    trainers = [t for h in plan.hosts for t in h.trainers]
    out: list[Callable[[], Iterator[Candidate]]] = []
    if trainers:
        out += [lambda: _zero(plan, ask, trainers), lambda: _offload_adam(plan, ask, trainers),
                lambda: _checkpointing(plan, ask, trainers), lambda: _micro(plan, ask, trainers)]
    out.append(lambda: _frozen_offload(plan, ask))
    if any(h.engine is not None and h.engine.vllm is not None for h in plan.groups):
        out += [lambda: _vllm_share(plan, ask), lambda: _vllm_sleep(plan, ask)]
    return out


def _zero(plan: RunPlan, ask: MemoryAsk, trainers: list[TrainerPlan]) -> Iterator[Candidate]:
    now = max(t.ds.stage if t.backend == "deepspeed" else -1 for t in trainers)
    for stage in range(max(now + 1, 1), 4):
        yield f"--ds.zero_stage {stage}", _trainers(plan, partial(_at_stage, stage)), ask


def _offload_adam(plan: RunPlan, ask: MemoryAsk,
                  trainers: list[TrainerPlan]) -> Iterator[Candidate]:
    if all(t.ds.adam_offload for t in trainers):
        return
    deepspeed = all(t.backend == "deepspeed" and t.ds.stage > 0 for t in trainers)
    label = "--ds.adam_offload" if deepspeed else "--ds.zero_stage 2 --ds.adam_offload"
    yield label, _trainers(plan, lambda t: dataclasses.replace(
        t, backend="deepspeed", ds=dataclasses.replace(
            t.ds, trainer="auto", adam_offload=True,
            zero_stage=t.ds.stage if deepspeed else 2))), ask


def _checkpointing(plan: RunPlan, ask: MemoryAsk,
                   trainers: list[TrainerPlan]) -> Iterator[Candidate]:
    if all(t.config.gradient_checkpointing for t in trainers):
        return
    key = "--model.gradient_checkpointing_enable" if plan.trainer("model") else \
        "--actor.gradient_checkpointing_enable"
    yield key, _trainers(plan, lambda t: dataclasses.replace(t, config=dataclasses.replace(
        t.config, gradient_checkpointing=True))), ask


def _micro(plan: RunPlan, ask: MemoryAsk, trainers: list[TrainerPlan]) -> Iterator[Candidate]:
    if ask.learn_tokens:
        tokens = ask.learn_tokens // 2
        while tokens >= ask.seq_len // 8 and tokens >= 1:
            yield (f"--train.max_tokens_per_gpu {tokens}", plan,
                   dataclasses.replace(ask, learn_tokens=tokens))
            tokens //= 2
        return
    micro = max(t.config.micro_train_batch_size for t in trainers) // 2
    while micro >= 1:
        try:
            changed = _trainers(plan, partial(_with_micro, micro))
        except ConfigError:  # the batch is no multiple of it
            micro //= 2
            continue
        yield f"--train.micro_batch_size {micro}", changed, ask
        micro //= 2


def _frozen_offload(plan: RunPlan, ask: MemoryAsk) -> Iterator[Candidate]:
    for role in ("ref", "reward"):
        if role in plan.roles and ask.model(role) and role not in ask.offload:
            yield f"--{role}.offload", plan, dataclasses.replace(
                ask, offload=(*ask.offload, role))


def _vllm_share(plan: RunPlan, ask: MemoryAsk) -> Iterator[Candidate]:
    shares = [h.engine.vllm.gpu_memory_utilization for h in plan.groups
              if h.engine is not None and h.engine.vllm is not None]
    share = round(max(shares) - 0.05, 2)
    while share >= 0.05:
        yield f"--vllm.gpu_memory_utilization {share:g}", _vllm(
            plan, gpu_memory_utilization=share), ask
        share = round(share - 0.05, 2)


def _vllm_sleep(plan: RunPlan, ask: MemoryAsk) -> Iterator[Candidate]:
    yield "--vllm.enable_sleep", _vllm(plan, enable_sleep=True), ask


def _at_stage(stage: int, t: TrainerPlan) -> TrainerPlan:
    return dataclasses.replace(t, backend="deepspeed", ds=dataclasses.replace(
        t.ds, trainer="auto", zero_stage=stage))


def _with_micro(micro: int, t: TrainerPlan) -> TrainerPlan:
    return dataclasses.replace(t, config=dataclasses.replace(t.config,
                                                             micro_train_batch_size=micro))


def _trainers(plan: RunPlan, change: Callable[[TrainerPlan], TrainerPlan]) -> RunPlan:
    hosts = tuple(dataclasses.replace(h, trainers=tuple(map(change, h.trainers)))
                  for h in plan.hosts)
    return dataclasses.replace(plan, hosts=hosts)


def _vllm(plan: RunPlan, **section: Any) -> RunPlan:
    """`plan` with the vLLM section's fields in `section` changed on every engine."""
    def host(h: HostPlan) -> HostPlan:
        if h.engine is None or h.engine.vllm is None:
            return h
        cfg = h.engine.vllm
        cfg = dataclasses.replace(cfg, section=dataclasses.replace(cfg.section, **section))
        return dataclasses.replace(h, engine=dataclasses.replace(h.engine, vllm=cfg))
    return dataclasses.replace(plan, hosts=tuple(map(host, plan.hosts)),
                               generator=host(plan.generator) if plan.generator else None)
