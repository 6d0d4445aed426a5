"""Run under torchrun: GRPO-style DeepSpeed steps on 2 ranks, with or without a checkpoint.

`python -m torch.distributed.run --nproc_per_node 2 torchrun_resume.py MODEL STORE MODES`:
MODES is a comma list: `straight` trains 4 steps; `first` trains 2 and saves `ck`;
`resumed` restores `ck` and trains 2. Rank 0 writes each run's final full weights to
STORE/<mode>.safetensors.
"""

from __future__ import annotations

import sys

import torch
from safetensors.torch import save_file

from alignflow.artifacts.store import Store
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer
from tests.distributed import dp_work

STAGE = 3


def run(model_dir: str, store_dir: str, mode: str) -> None:
    cfg = TrainerConfig(lr=3e-3, lr_warmup_ratio=0.25, min_lr_ratio=0.1, total_steps=4)
    trainer = DeepSpeedTrainer(load_causal_lm(model_dir), cfg, DSConfig(zero_stage=STAGE),
                               overrides={"zero_optimization":
                                          {"stage3_param_persistence_threshold": 0}})
    store = Store.open(store_dir)
    torch.manual_seed(100 + torch.distributed.get_rank())  # rank-local draws, as in real runs
    if mode == "resumed":
        torch.manual_seed(999)
        trainer.restore(store, "ck")
    steps = range(trainer.global_step, 4 if mode != "first" else 2)
    for step in steps:
        dp_work.grpo_step(trainer, step + int(torch.randint(0, 1000, ()).item()))
    if mode == "first":
        trainer.save(store, "ck")
    weights = dict(trainer.state_dict_for_sync())
    if torch.distributed.get_rank() == 0:
        save_file({k: v.clone() for k, v in weights.items()},  # tied weights share one
                  f"{store_dir}/{mode}.safetensors")


if __name__ == "__main__":
    torch.set_num_threads(1)
    for name in sys.argv[3].split(","):
        run(sys.argv[1], sys.argv[2], name)
