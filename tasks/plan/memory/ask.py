"""What the memory model reads of a run's config beyond its plan: each role's model shape,
sequence lengths, micro-batches, and which frozen models are parked off the GPU.

Read by key (`MemoryAsk.of(get)`, `get` a config's dotted-key lookup), so every family's
config serves (RL's `actor.*`, the offline flows' `model.*`) without this module importing
a flow: the keys are OpenRLHF 0.11's, as the configs spell them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from alignflow.tasks.plan.memory.known import model_shape
from alignflow.tasks.plan.memory.shape import ModelShape

Frozen = Literal["alignflow", "openrlhf"]
PAIRED = ("dpo", "rm")  # offline kinds whose examples are (chosen, rejected) pairs
MODEL_KEYS = {  # role -> keys naming its model, first set wins (none: the trained model's)
    "actor": ("actor.model_name_or_path",), "model": ("model.model_name_or_path",),
    "critic": ("critic.model_name_or_path", "actor.model_name_or_path"),
    "ref": ("ref.model_name_or_path", "actor.model_name_or_path", "model.model_name_or_path"),
    "reward": ("reward.model_name_or_path",),
    "teacher": ("teacher.model_name_or_path",),
}


@dataclass(frozen=True, kw_only=True)
class MemoryAsk:
    """The facts of a run the memory model needs besides its plan.

    frozen: how reference and reward models are held — `alignflow` as this version does
    (a whole replica on every GPU of their host: `tasks/steps/host.py`; reward models in
    fp32), or `openrlhf` as OpenRLHF does (bf16, ZeRO-3 shards over the role's ranks when
    the actor trains at stage 3, parameters on the CPU with `--ref.offload`; weights synced
    a tensor at a time, every model its own process)."""

    models: dict[str, ModelShape]
    unread: tuple[str, ...] = ()  # "role: name" whose config.json could not be read
    seq_len: int = 2048  # prompt + response tokens of one sequence
    new_tokens: int = 1024  # response tokens: the logit rows of the padded learn path
    pairs: int = 1  # sequences per training example (DPO, RM: chosen + rejected)
    forward_micro: int = 1  # sequences per reference/value/log-prob pass
    forward_tokens: int | None = None  # tokens per such pass (dynamic batches)
    learn_tokens: int | None = None  # tokens per training micro-batch (dynamic batches)
    reward_micro: int = 8  # sequences per reward-model pass
    offload: tuple[str, ...] = ()  # frozen roles parked off the GPU between uses
    with_model: tuple[str, ...] = ()  # frozen roles an offline flow's trained host holds
    packing: bool = False  # packed micro-batches: logits for every token
    frozen: Frozen = "alignflow"

    def model(self, role: str) -> ModelShape | None:
        return self.models.get(role)

    @classmethod
    def of(cls, get: Callable[[str], Any], *, kind: str = "",
           read: Callable[[str], dict | None] | None = None) -> MemoryAsk:
        """The ask of a config whose dotted keys `get` looks up (None: no such key); `read`
        finds a model's config.json (`known.model_shape`)."""
        models, unread = {}, []
        for role, keys in MODEL_KEYS.items():
            name = next((v for k in keys if (v := get(k))), None)
            if name is None:
                continue
            shape = model_shape(str(name), read)
            if shape is None:
                unread.append(f"{role}: {name}")
            else:
                models[role] = shape
        new = get("rollout.max_new_tokens") or get("data.max_new_tokens")
        seq = get("data.max_len") or (get("data.prompt_max_len") or 0) + (new or 0) or 2048
        dynamic = bool(get("train.dynamic_batch_enable"))
        offload = tuple(r for r in ("ref", "reward") if get(f"{r}.offload"))
        return cls(models=models, unread=tuple(unread), seq_len=int(seq),
                   new_tokens=int(new or seq), pairs=2 if kind in PAIRED else 1,
                   forward_micro=int(get("rollout.micro_batch_size") or 1),
                   forward_tokens=(get("rollout.max_tokens_per_gpu")
                                   or get("train.max_tokens_per_gpu")) if dynamic else None,
                   learn_tokens=get("train.max_tokens_per_gpu") if dynamic else None,
                   reward_micro=int(get("reward.micro_batch") or 8), offload=offload,
                   packing=bool(get("ds.packing_samples")),
                   with_model=("ref",) if get("model") is not None and get("ref") is not None
                   else ())
