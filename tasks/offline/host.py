"""The offline training host: one process holding the trained model, its trainer (PyTorch
or DeepSpeed, by the `ds` section; LoRA adapters with `ds.lora.rank`) and the prepared
examples between `train` tasks; and the teacher host for distillation.

After each train task the host checkpoints the trainer (weights or adapters, optimizer,
scheduler, RNG, step) into the task's checkpoint folder; the engine calls `restore` with
the newest committed one before the host's first live task of a resumed run. A host may
be one rank of a data-parallel worker group (`join_group`); rank 0 prunes old checkpoints.
"""

from __future__ import annotations

import functools

import torch

from alignflow.artifacts.checkpoints import index_table
from alignflow.artifacts.ckpt_index import prune, saved_by_run
from alignflow.artifacts.schemas import CHECKPOINTS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.distributed import group
from alignflow.tasks.distributed.ray_group import GroupMember
from alignflow.tasks.modeling.critic import Critic
from alignflow.tasks.modeling.device import host_device
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.offline.host_spec import OfflineHostSpec
from alignflow.tasks.steps.memo import Memo
from alignflow.tasks.steps.saver import BackgroundSaves
from alignflow.tasks.trainers.base import Trainer
from alignflow.tasks.trainers.build import load_trainer, trainable_lm
from alignflow.tasks.zoo.registry import resolve_model


class OfflineHost(Memo, GroupMember):
    """Holds the trainer; `save` / `restore` are the engine's checkpoint protocol."""

    def __init__(self, spec: OfflineHostSpec) -> None:
        self.spec = spec
        self.saved: list[str] = []
        self.saves = BackgroundSaves()
        if spec.num_threads:
            torch.set_num_threads(spec.num_threads)

    def group_on_gpu(self) -> bool:
        return self.spec.plan.gpus_per_worker > 0

    def preload(self) -> None:
        """Load the tokenizer and the trained model now, when the host starts (and say
        which device placement gave it: a sighting on a simulated cluster)."""
        host_device(self.spec.plan.gpus_per_worker, kind=f"host {self.spec.plan.name}")
        _ = self.tokenizer, self.trainer

    @functools.cached_property
    def path(self) -> str:
        return resolve_model(self.spec.pretrain)

    @functools.cached_property
    def tokenizer(self):
        return load_tokenizer(self.path, padding_side="right")

    @functools.cached_property
    def trainer(self) -> Trainer:
        """A value-head model for reward models, else the causal LM (or its adapters)."""
        plan = self.spec.trainer
        return load_trainer(self._model, plan.config, plan.ds)  # ZeRO-3: loaded partitioned

    def _model(self) -> torch.nn.Module:
        if not self.spec.value_head:
            return trainable_lm(self.path, self.spec.trainer.ds)
        model = Critic.from_pretrained(self.path)
        model.model.config.pad_token_id = self.tokenizer.pad_token_id
        return model

    def save(self, store, folder: str) -> str:
        """Checkpoints the trainer into `folder` (in the background: `steps/saver.py`) and
        stages its `checkpoints` row, as RL hosts do; keeps the last `keep_checkpoints`
        (>= 2: the one before the newest is the last committed one until this task commits).
        Rank 0 of a group prunes and lists; every rank writes its part."""
        scope, step = current_scope(), self.trainer.global_step
        kind = "reward_model" if self.spec.value_head else "model"

        def after(nbytes: int) -> list:
            ref = scope.stage(CHECKPOINTS, index_table(
                run_id=scope.run_id, task_key=scope.task_key, step=step, path=folder,
                kind=kind, nbytes=nbytes))
            if group.rank_and_size()[0] != 0:
                return []
            self.saved.append(folder)
            prune(store, self.saved, self.spec.keep_checkpoints)
            return [ref]
        self.saves.save(self.trainer, store, folder, {}, after)
        return folder

    def restore(self, store, folder: str) -> None:
        self.trainer.restore(store, folder)
        self.saved = saved_by_run(store, folder.split("/")[1])  # earlier drivers' too


class TeacherHost(Memo):
    """The frozen distillation teacher, loaded once."""

    def __init__(self, path: str, *, dtype: str = "fp32", num_threads: int | None = None):
        self.spec_path = path
        self.dtype = dtype
        if num_threads:
            torch.set_num_threads(num_threads)

    def preload(self) -> None:
        _ = self.model, self.pad_id

    @functools.cached_property
    def model(self):
        return load_causal_lm(resolve_model(self.spec_path), dtype=self.dtype).requires_grad_(False)

    @functools.cached_property
    def pad_id(self) -> int:
        return load_tokenizer(resolve_model(self.spec_path)).pad_token_id

    def restore(self, store, folder: str) -> None:
        """Nothing to restore: the teacher never changes."""
