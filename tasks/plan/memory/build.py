"""A run plan's memory plan: every distinct GPU's peak by phase and item, refused in one
line where a GPU's peak is over its memory (naming the GPU, phase, item and the flags that
would make it fit: `fixes.py`), and vLLM's KV cache checked against its share."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from alignflow.tasks.plan.memory import engine, fixes
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.layout import GpuSet, gpu_sets
from alignflow.tasks.plan.memory.peaks import gpu_peak
from alignflow.tasks.plan.memory.report import GIB, PHASE_NAMES, GpuPeak, MemoryPlan, gib
from alignflow.tasks.plan.records import RunPlan

DEFAULT_GPU = 80 * GIB  # A100/H100 80GB, what OpenRLHF's examples and paper ran on


def memory_plan(plan: RunPlan, ask: MemoryAsk, gpu_memory: int | None = None) -> MemoryPlan:
    """The memory plan of `plan` for GPUs of `gpu_memory` bytes (None: 80 GiB assumed)."""
    total = gpu_memory or DEFAULT_GPU
    notes = [f"model {u}: its config.json could not be read (not a local folder, not in "
             "the Hub cache, not a published config alignflow lists): not counted"
             for u in ask.unread]
    if ask.model("actor") is None and ask.model("model") is None:
        return MemoryPlan(gpu_memory=int(total), assumed=gpu_memory is None, frozen=ask.frozen,
                          gpus=(), notes=(*notes, "no trained model's shape: no peaks"),
                          unknown=ask.unread or ("the trained model",))
    rows, problems = [], []
    for gpus in gpu_sets(plan):
        peak, eng = gpu_peak(gpus, plan, ask, total)
        rows.append(peak)
        if eng is not None and gpus.vllm is not None:
            problems += _kv_problem(gpus, eng, ask)
            notes += _kv_note(gpus, eng, ask)
        if peak.peak > total:
            problems.append(refusal(peak, total, fixes.fixes(gpus.name, plan, ask, total),
                                    ask))
    notes += _notes(plan, ask, rows, total)
    return MemoryPlan(gpu_memory=int(total), assumed=gpu_memory is None, frozen=ask.frozen,
                      gpus=tuple(rows), problems=tuple(problems), notes=tuple(notes),
                      unknown=ask.unread)


def refusal(peak: GpuPeak, total: float, found: list[str], ask: MemoryAsk) -> str:
    """One line: the GPU, its peak's phase and item (and the largest beside it), and what
    would make it fit."""
    largest, size = peak.items[0]
    whole = largest.removesuffix(" weights")
    if found:
        fix = "expected any of: " + "; ".join(found)
    elif whole in ("ref", "reward") and ask.frozen == "alignflow":
        fix = (f"the {whole} model is whole on every GPU of its host unless the actor "
               "trains at ZeRO-3 (then each rank holds a shard, as in OpenRLHF): expected "
               f"--ds.zero_stage 3 or a smaller {whole} model")
    else:
        fix = "no single flag makes it fit: expected more GPUs for these roles or a smaller model"
    return (f"GPU memory: {peak.gpus} ({peak.count} GPU(s)) peaks at {gib(peak.peak)} in "
            f"{PHASE_NAMES[peak.phase]} ({peak.item} {gib(dict(peak.items)[peak.item])}"
            + (f" beside {largest} {gib(size)}" if largest != peak.item else "")
            + f"), over the {gib(total)} of each GPU; {fix}")


def _kv_problem(gpus: GpuSet, eng: engine.EngineBytes, ask: MemoryAsk) -> list[str]:
    shape = ask.model("actor") or ask.model("model")
    if shape is None or gpus.vllm is None:  # no model or no vLLM: no KV cache to hold
        return []
    need = engine.engine_seq_len(shape, gpus.vllm, ask.seq_len)
    if eng.sequences(need) >= 1:
        return []
    return [f"vLLM on {gpus.name} cannot start: its share leaves {gib(eng.kv_room)} for the "
            f"KV cache and one sequence of {need} tokens needs "
            f"{gib(eng.kv_per_token * need)}; expected a higher --vllm.gpu_memory_utilization, "
            f"--vllm.max_model_len {ask.seq_len}, or more --vllm.tensor_parallel_size"]


def _kv_note(gpus: GpuSet, eng: engine.EngineBytes, ask: MemoryAsk) -> list[str]:
    held = eng.sequences(ask.seq_len)
    if held >= eng.max_num_seqs or held < 1:
        return []
    return [f"vLLM on {gpus.name}: its KV cache holds {int(held)} sequences of "
            f"{ask.seq_len} tokens at once (vllm.max_num_seqs={eng.max_num_seqs}: the rest "
            "wait their turn)"]


def _notes(plan: RunPlan, ask: MemoryAsk, rows: list[GpuPeak], total: float) -> list[str]:
    """What the model assumed where alignflow and OpenRLHF differ."""
    out = []
    trainers = [t for h in plan.hosts for t in h.trainers]
    if ask.frozen == "alignflow" and any(t.ds.enable_sleep for t in trainers):
        out.append("ds.enable_sleep frees nothing at these peaks: the first generate runs "
                   "before any learn step has put the trainers to sleep")
    shared = ask.frozen == "alignflow" and "reward" in plan.roles and ask.model("reward") \
        is not None and any(t.backend == "deepspeed" and t.ds.stage == 3 for t in trainers)
    if shared:
        other = dataclasses.replace(ask, frozen="openrlhf")
        theirs = {g.name: gpu_peak(g, plan, other, total)[0].peak for g in gpu_sets(plan)}
        said = ", ".join(f"{r.gpus} {gib(theirs[r.gpus])}" for r in rows if r.gpus in theirs)
        out.append("reward models are counted as this version holds them: ZeRO-3 shards in "
                   f"fp32 (OpenRLHF's in bf16; its peaks: {said})")
    return out


def with_memory(plan: RunPlan, ask: MemoryAsk | Callable[[], MemoryAsk]) -> RunPlan:
    """`plan` carrying its memory plan, for GPUs of the cluster's `gpu_memory` (80 GiB
    assumed when not given); a plan without GPUs carries none (and a callable `ask`, which
    may read models' config.json, is not called)."""
    if not gpu_sets(plan):
        return plan
    asked = ask if isinstance(ask, MemoryAsk) else ask()
    return dataclasses.replace(plan, memory=memory_plan(plan, asked, plan.cluster.gpu_memory))
