"""What each model and engine of a GPU set puts on one of its GPUs, by phase.

A `Part` is one model or engine: what it holds whenever it is on the GPU (`resident`),
what it adds in a phase (`extra`: a training step's gradients and activations, a forward's
working set, a sync's staging), and the phases it is off the GPU (`away`: a frozen model
parked between uses, an asleep engine). The trained roles learn one at a time, so a
phase's extras are summed within a part and the largest part's taken (`peaks.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.tasks.plan.hosts import TrainerPlan
from alignflow.tasks.plan.memory import activations, engine, states
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.layout import GpuSet
from alignflow.tasks.plan.memory.shape import ModelShape
from alignflow.tasks.plan.memory.states import Items
from alignflow.tasks.plan.records import RunPlan

FROZEN = ("ref", "reward", "teacher")
VALUE_ROLES = ("critic", "reward")  # no LM head: one value per token


@dataclass(frozen=True)
class Part:
    """One model or engine on a GPU (see the module's docstring)."""

    who: str
    resident: Items
    extra: dict[str, Items] = field(default_factory=dict)
    away: tuple[str, ...] = ()


def trained(role: str, shape: ModelShape, plan: TrainerPlan, ask: MemoryAsk,
            sleeps: bool) -> Part:
    """A trained role: its states always; a training step's gradients and activations in
    `learn`; a forward pass (values, old log-probs) in `forward`; ZeRO-3's gathers."""
    resident, learn = states.trainer_items(role, shape, plan)
    mb = states.module_bytes(plan)
    precision = activations.precision_of(mb, plan.config.dtype == "bf16")
    head, offline = role not in VALUE_ROLES, role == "model"
    tokens = ask.learn_tokens or plan.config.micro_train_batch_size * ask.seq_len * ask.pairs
    rows = tokens if ask.packing or offline else \
        plan.config.micro_train_batch_size * ask.new_tokens * ask.pairs
    acts = activations.learn(shape, tokens=tokens, logit_rows=rows, precision=precision,
                             checkpointing=plan.config.gradient_checkpointing, head=head)
    learn |= {f"{role} {k}": v for k, v in acts.items()}
    extra = {"learn": learn}
    if role == "critic":
        extra["forward"] = _forward(role, shape, ask, precision, head=False)
    if plan.backend == "deepspeed" and plan.ds.stage == 3:
        one: dict[str, float] = {f"{role} ZeRO-3 gathers": mb * shape.largest_tensor}  # a tensor at a time
        extra |= {"sync": one, "save": one}
        if "forward" in extra:
            extra["forward"][f"{role} ZeRO-3 gathers"] = states.gathered(shape, mb)
    if sleeps:  # OpenRLHF's ds.enable_sleep: states on the CPU but for the role's own step
        states_ = {k: v for k, v in resident.items() if not k.endswith(" weights")}
        resident = {k: v for k, v in resident.items() if k not in states_}
        extra["learn"] = {**states_, **extra["learn"]}
    return Part(role, resident, extra)


def frozen(role: str, shape: ModelShape, ask: MemoryAsk, *, dtype_bytes: int,
           shards: int) -> Part:
    """A reference, reward or teacher model: its weights (a ZeRO-3 shard of `shards` when the
    actor trains at stage 3, both here and in OpenRLHF), on the GPU from load on (with
    `<role>.offload` a replica is parked after each use, but the host loads every model
    before the first generate; ZeRO-3 shards, and OpenRLHF's models, stay on the CPU but for
    their forward); the forward's working set."""
    precision: activations.Precision = "bf16" if dtype_bytes == 2 else "fp32"
    work = _forward(role, shape, ask, precision, head=role not in VALUE_ROLES)
    weights = {f"{role} weights": states.frozen_weights(shape, dtype_bytes, shards)}
    if shards > 1:  # a ZeRO-3 eval engine gathers each module for its forward
        work[f"{role} ZeRO-3 gathers"] = states.gathered(shape, dtype_bytes)
    if role not in ask.offload:
        return Part(role, weights, {"forward": work})
    if shards > 1:  # ZeRO-3 parameters on the CPU: only the gathered modules come
        return Part(role, {}, {"forward": work})
    if ask.frozen == "alignflow":  # loaded with the host (the first generate), then parked
        return Part(role, weights, {"forward": work}, away=("learn", "sync", "save"))
    return Part(role, {}, {"forward": {**weights, **work}})


def _forward(role: str, shape: ModelShape, ask: MemoryAsk, precision: activations.Precision,
             *, head: bool) -> Items:
    own = role == "reward" and ask.frozen == "alignflow"  # OpenRLHF: the rollout's micro-batch
    micro = ask.reward_micro if own else ask.forward_micro * ask.pairs
    tokens = ask.forward_tokens or micro * ask.seq_len
    rows = tokens if ask.packing else micro * ask.new_tokens
    work = activations.forward(shape, tokens=tokens, logit_rows=rows, precision=precision,
                               head=head)
    return {f"{role} {k}": v for k, v in work.items()}


def engine_part(gpus: GpuSet, plan: RunPlan, ask: MemoryAsk,
                gpu_total: float) -> tuple[Part, engine.EngineBytes] | None:
    """The engine rank on each GPU of `gpus` (none: no engine there)."""
    shape = ask.model("actor") or ask.model("model")
    if not gpus.engine or shape is None:
        return None
    if gpus.engine == "hf":
        dtype = 2 if _param_dtype(plan) == "bf16" else 4
        got = engine.hf(shape, weight_bytes=dtype, micro=ask.forward_micro, seq_len=ask.seq_len)
    elif gpus.vllm is not None:
        got = engine.vllm(shape, gpus.vllm, gpu_total=gpu_total,
                          tensor_parallel=gpus.tensor_parallel,
                          by_bucket=ask.frozen == "alignflow")
    else:
        return None
    away: tuple[str, ...] = ("forward", "learn", "save") if got.sleeps else ()
    sync = got.sync
    if got.sleeps and ask.frozen == "openrlhf" and gpus.vllm is not None:
        away += ("sync",)  # woken for a sync with its weights only
        sync = {**sync, "vLLM weights": shape.params * engine.dtype_bytes(gpus.vllm)
                / gpus.tensor_parallel}
    return Part("engine", got.resident, {"generate": got.generate, "sync": sync}, away), got


def _param_dtype(plan: RunPlan) -> str:
    """The run's weights' dtype (`ds.param_dtype`): the reference's, the engines'."""
    found = next((t for h in plan.hosts for t in h.trainers), None)
    return found.ds.param_dtype if found is not None else "fp32"


def parts(gpus: GpuSet, plan: RunPlan, ask: MemoryAsk) -> list[Part]:
    """The models of `gpus`' hosts on one of its GPUs (the engine apart: `engine_part`)."""
    out, dtype = [], 2 if _param_dtype(plan) == "bf16" else 4
    actor = plan.trainer("actor") or plan.trainer("model")
    zero3 = actor is not None and actor.backend == "deepspeed" and actor.ds.stage == 3
    for host in gpus.hosts:
        for role in host.roles + (ask.with_model if "model" in host.roles else ()):
            shape, plan_of = ask.model(role), host.trainer(role)
            if shape is None or _base_of_actor(role, ask, actor):
                continue
            if plan_of is not None:
                sleeps = plan_of.ds.enable_sleep and ask.frozen == "openrlhf"
                out.append(trained(role, shape, plan_of, ask, sleeps))
            elif role in FROZEN:
                bytes_ = 4 if role == "reward" and ask.frozen == "alignflow" else dtype
                shards = host.workers if zero3 else 1  # ZeRO-3 eval engines, as OpenRLHF
                out.append(frozen(role, shape, ask, dtype_bytes=bytes_, shards=shards))
    return out


def _base_of_actor(role: str, ask: MemoryAsk, actor: TrainerPlan | None) -> bool:
    """LoRA's reference is the actor with its adapters off: no second copy."""
    ref, trained = ask.model("ref"), ask.model("actor")
    same = ref is not None and trained is not None and ref.name == trained.name
    return role == "ref" and actor is not None and actor.ds.lora.enabled and same
