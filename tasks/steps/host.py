"""The model host: one process holding the models of some roles between tasks.

The flow engine runs a host as a stateful worker (a Ray actor, or inline in the driver).
Models load on first use and stay. After every learn task the host checkpoints the roles
it trains into the task's checkpoint folder and writes `host.json` there, naming the newest
checkpoint of *each* trained role; `restore` reads it, so a resumed run continues from
exactly the state an uninterrupted run would have had, its engine synced to that policy.

The host is built as the run's plan says (`HostSpec.plan`, `tasks/plan/`): its roles, its
GPUs (models live on CUDA when the plan gave the host GPUs, else on the CPU), each trained
role's trainer backend and settings, its generation engine (HF or vLLM,
`tasks/steps/rollout_engine.py`). It implements the host interface (`host_api.py`); its engine side (which rank drives the
engine, syncs) is `host_engine.py`.

A host may be one rank of a data-parallel worker group (`join_group`): every rank holds
the same roles and runs every task; trainers sum gradients over the ranks, and rank 0
alone writes what the task commits (`TaskScope.write` is a no-op on the other ranks).
With LoRA (`ds.lora.rank`) the reference, when it is the actor's own starting point and
lives on the actor's host, is the actor with its adapters switched off: no second copy.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch

from alignflow.artifacts.checkpoints import index_table
from alignflow.artifacts.ckpt_index import INDEX, prune, saved_by_run
from alignflow.artifacts.schemas import CHECKPOINTS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.distributed import group
from alignflow.tasks.distributed.ray_group import GroupMember
from alignflow.tasks.modeling import lora
from alignflow.tasks.modeling.critic import Critic
from alignflow.tasks.modeling.device import check_attention, host_device, on_gpu
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.modeling.offload import offload as offload_module
from alignflow.tasks.modeling.offload import reload as reload_module
from alignflow.tasks.plan.hosts import TrainerPlan
from alignflow.tasks.plan.placement import Role
from alignflow.tasks.rewards.registry import build_reward
from alignflow.tasks.steps.host_engine import EngineSide
from alignflow.tasks.steps.host_spec import HostSpec
from alignflow.tasks.steps.memo import Memo
from alignflow.tasks.steps.saver import BackgroundSaves
from alignflow.tasks.trainers.base import Trainer
from alignflow.tasks.trainers.build import load_trainer, trainable_lm
from alignflow.tasks.trainers.ema import EMA
from alignflow.tasks.trainers.sleep import sleep_trainer, wake_trainer
from alignflow.tasks.zoo.registry import resolve_model

HOST_FILE = INDEX


class ModelHost(Memo, GroupMember, EngineSide):
    """Holds roles' models; `restore` brings them back to a committed checkpoint."""

    def __init__(self, spec: HostSpec) -> None:
        self.spec = spec
        self.latest: dict[str, str] = {}  # trained role -> its newest checkpoint folder
        self.saved: dict[str, list[str]] = {}  # trained role -> folders saved by this process
        self.policy_version = 0
        self._ref_file: str | None = None  # where the offloaded reference weights wait
        self.saves = BackgroundSaves()
        if spec.num_threads:
            torch.set_num_threads(spec.num_threads)

    def preload(self) -> None:
        """Load every role's model now (the engine calls this when the host starts), so no
        task pays for a first load; the rank's GPU first, before anything touches CUDA.
        The engine comes before the roles: an in-process vLLM engine claims its
        gpu_memory_utilization share of the whole GPU when it starts (and refuses to start
        when less is free), so models loaded before it would take that share (OpenRLHF
        creates its engines before the models too)."""
        _ = self.device, self.tokenizer
        if self.spec.plan.engine is not None and self.drives_engine:
            _ = self.engine
        for role in ("actor", "ref", "critic", "reward"):
            if self.has(role):
                getattr(self, role)

    def group_on_gpu(self) -> bool:
        return self.spec.plan.gpus_per_worker > 0

    def has(self, role: Role) -> bool:
        return role in self.spec.plan.roles

    def _trained(self, role: Role) -> TrainerPlan:
        found = self.spec.plan.trainer(role)
        assert found is not None, f"{role} is not trained on host {self.spec.plan.name}"
        return found

    @functools.cached_property
    def device(self) -> torch.device:
        plan = self.spec.plan
        return host_device(plan.gpus_per_worker, first_gpu=plan.first_gpu,
                           kind=f"host {plan.name}")

    def _load_lm(self, name: str, dtype: str):
        attn = check_attention(self.spec.attn_implementation, self.device)
        return load_causal_lm(resolve_model(name), dtype=dtype,
                              attn_implementation=attn).to(self.device)

    @functools.cached_property
    def tokenizer(self):
        return load_tokenizer(resolve_model(self.spec.pretrain), padding_side="left")

    @functools.cached_property
    def actor(self) -> Trainer:
        plan = self._trained("actor")
        attn = check_attention(self.spec.attn_implementation, self.device)
        path = resolve_model(self.spec.pretrain)
        # a 4-bit base is placed by bitsandbytes; under ZeRO-3 the model loads partitioned
        device = None if plan.ds.load_in_4bit else self.device
        return load_trainer(lambda: trainable_lm(path, plan.ds, attn_implementation=attn),
                            plan.config, plan.ds, device)

    @functools.cached_property
    def ema(self) -> EMA | None:
        """The policy's moving average (train.enable_ema), from the actor's weights when it
        is first asked for: before any step of a new run, or replaced by `restore`."""
        beta = self.spec.ema_beta
        return None if beta is None or not self.has("actor") else EMA(self.actor.model, beta)

    @property
    def trainer(self) -> Trainer:
        """The trained model's trainer (the policy), as every training step names it."""
        return self.actor

    @functools.cached_property
    def ref(self):
        """The reference model: a ZeRO-3 shard on each rank when the run trains at stage 3
        (`deepspeed/frozen.py`), else a whole replica on the host's device."""
        name = resolve_model(self.spec.ref_pretrain or self.spec.pretrain)
        if self.frozen_sharded:
            attn = check_attention(self.spec.attn_implementation, self.device)
            return self._frozen("ref", lambda: load_causal_lm(
                name, dtype=self.spec.dtype, attn_implementation=attn), self.spec.dtype)
        model = self._load_lm(name, self.spec.dtype)
        model.requires_grad_(False)
        return model

    def teacher(self, name: str) -> torch.nn.Module:
        """The on-policy distillation teacher `name` (`tasks/rl/distill_online.py`), frozen
        and held as the reference is: ZeRO-3 shards at stage 3, else a whole replica."""
        held, attn = self.__dict__.setdefault("_teachers", {}), self.spec.attn_implementation
        if name not in held and self.frozen_sharded:
            held[name] = self._frozen("ref", lambda: load_causal_lm(resolve_model(name), dtype=(
                self.spec.dtype), attn_implementation=check_attention(attn, self.device)),
                self.spec.dtype, key=f"-teacher-{name}")
        if name not in held:
            held[name] = self._load_lm(name, self.spec.dtype).requires_grad_(False)
        return held[name]

    @functools.cached_property
    def frozen_sharded(self) -> bool:
        """Reference and reward models held as ZeRO-3 shards: the run's `ds` section (else
        this host's trainers') trains at stage 3, as OpenRLHF shards them."""
        from alignflow.tasks.trainers.deepspeed.section import DSConfig

        found = self.spec.ds or next((t.ds for t in self.spec.plan.trainers), None)
        return isinstance(found, DSConfig) and found.uses_deepspeed and found.stage == 3

    def _frozen(self, role: Role, load, dtype: str, key: str = "") -> torch.nn.Module:
        """`load()`'s model as a frozen ZeRO-3 engine's module (kept alive by the host),
        its shards on the CPU when `role` is offloaded (DeepSpeed's parameter offload)."""
        from alignflow.tasks.trainers.deepspeed.frozen import frozen_engine

        engine = frozen_engine(load, dtype=dtype, offload=role in self.spec.offload)
        self.__dict__.setdefault("_engines", {})[f"{role}{key}"] = engine
        return engine.module

    @property
    def ref_is_base_of_actor(self) -> bool:
        """LoRA with the reference = the actor's starting point on this host."""
        same = self.spec.ref_pretrain in (None, self.spec.pretrain)
        return self.has("actor") and self._trained("actor").ds.lora.enabled and same

    @contextlib.contextmanager
    def reference_model(self) -> Iterator[torch.nn.Module]:
        """The reference policy for the enclosed forward passes (eval mode)."""
        if not self.ref_is_base_of_actor:
            yield self.use_ref()
            return
        model = self.actor.model
        was_training = model.training
        model.eval()
        try:
            with lora.adapter_disabled(model) as base:
                yield base
        finally:
            model.train(was_training)

    def use_ref(self):
        """The reference model, brought back first if it was offloaded."""
        if self._ref_file is not None:
            reload_module(self.ref, self._ref_file, self.device)
            self._ref_file = None
        return self.ref

    def idle(self, role: Role) -> None:
        """A step is done with `role` for this iteration: offload it if configured."""
        if role in ("actor", "critic") and self._sleeps(role):
            sleep_trainer(self.actor if role == "actor" else self.critic)
        if role not in self.spec.offload or (role == "ref" and self.ref_is_base_of_actor) \
                or self.frozen_sharded:  # sharded: DeepSpeed keeps the shards on the CPU
            return
        if role == "ref" and self._ref_file is None:
            self._ref_file = offload_module(self.ref, prefix="alignflow-ref-")
        elif role == "reward":
            self.reward.offload()

    def wake(self, role: Role) -> None:
        """A learn step is about to train `role`: bring a sleeping trainer back."""
        if self._sleeps(role):
            wake_trainer(self.actor if role == "actor" else self.critic, self.device)

    def _sleeps(self, role: str) -> bool:
        placed = on_gpu(self.spec.plan.gpus_per_worker)  # fake GPUs sleep too (simulated)
        return self.spec.trainer_sleep and placed and role in self.__dict__

    @functools.cached_property
    def critic(self) -> Trainer:
        """The value model: fully trained (no adapters) on the actor's backend."""
        plan = self._trained("critic")
        path = resolve_model(self.spec.critic_pretrain or self.spec.pretrain)
        normalize = self.spec.critic_normalize
        return load_trainer(lambda: Critic.from_pretrained(path, normalize=normalize),
                            plan.config, plan.ds, self.device)

    @functools.cached_property
    def reward(self):
        assert self.spec.rewards is not None, "reward role without a reward config"
        reward = build_reward(self.spec.rewards)
        for key, source in reward.sources.items():  # reward models go where the host computes
            model = getattr(source, "model", None)
            if isinstance(model, torch.nn.Module) and self.frozen_sharded:  # partitioned here
                dtype = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(
                    next(model.parameters()).dtype, "fp32")
                source.model = self._frozen("reward", lambda m=model: m, dtype, f":{key}")
            elif isinstance(model, torch.nn.Module):
                model.to(self.device)
        return reward

    # -- checkpoints -------------------------------------------------------------------
    def save(self, store, folder: str, role: Role = "actor", *, extra: dict | None = None) -> str:
        """Checkpoints `role` under `folder/<role>` (in the background: `saver.py`), then
        records every trained role's newest in `host.json` and stages a `checkpoints` row."""
        trainer = self.actor if role == "actor" else self.critic
        scope, rel = current_scope(), f"{folder}/{role}"
        version, step = self.policy_version, trainer.global_step

        def after(nbytes: int) -> list:
            if role == "actor" and self.ema is not None and group.rank_and_size()[0] == 0:
                nbytes += self.ema.save(store, rel)  # beside the policy's, before the index
            ref = scope.stage(CHECKPOINTS, index_table(
                run_id=scope.run_id, task_key=scope.task_key, step=step, path=rel, kind=role,
                policy_version=version, nbytes=nbytes))
            self.latest[role] = rel
            if group.rank_and_size()[0] == 0:  # the other ranks of a group wrote their shards
                store.write_json(f"{folder}/{HOST_FILE}",
                                 {"latest": dict(self.latest), "policy_version": version})
                self._prune(store, role, rel)
            return [ref]
        self.saves.save(trainer, store, rel, {"policy_version": version, **(extra or {})}, after)
        return folder

    def settle(self) -> None:
        """Wait until the checkpoints being written are in the store."""
        for role in ("actor", "critic"):
            if role in self.__dict__:
                getattr(self.__dict__[role], "settle", lambda: None)()

    def _prune(self, store, role: str, newest: str) -> None:
        """Keeps the last `keep_checkpoints` of `role`. Never fewer than 2: the one before
        the newest is the last *committed* one until the running task commits."""
        saved = self.saved.setdefault(role, [])
        saved.append(newest)
        prune(store, saved, self.spec.keep_checkpoints)

    def restore(self, store, folder: str) -> None:
        """Loads each trained role from its newest checkpoint named in `folder/host.json`."""
        meta = store.read_json(f"{folder}/{HOST_FILE}")
        self.latest = dict(meta["latest"])
        self.saved = {r: saved_by_run(store, folder.split("/")[1], r) for r in self.latest}
        self.policy_version = int(meta["policy_version"])
        for role, rel in self.latest.items():
            if self.has(role):
                (self.actor if role == "actor" else self.critic).restore(store, rel)
                if role == "actor" and self.ema is not None:
                    self.ema.restore(store, rel)
        if self.spec.plan.engine is not None and "actor" in self.latest:
            self.sync_engine()
