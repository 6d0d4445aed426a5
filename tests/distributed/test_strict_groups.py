"""Data-parallel training on the group the code forms on GPUs, with NCCL's refusals
(`tasks/distributed/strict.py`): two ranks step and checkpoint under the PyTorch trainer
and DeepSpeed ZeRO-2/3 — every collective they and alignflow's statistics make must be one
the GPU group carries (issue 21 §3.1; a CPU byte count all-reduced on an NCCL-only group
killed every multi-worker DeepSpeed checkpoint)."""

from __future__ import annotations

import pytest

from tests.fixtures.ranks import run_ranks

pytest.importorskip("deepspeed")
pytestmark = pytest.mark.slow


def _train_and_save(rank: int, world: int, port: int, model_dir: str, store_dir: str,
                    backend: str, stage: int | None) -> dict:
    from alignflow.artifacts.store import Store
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.build import build_trainer
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from tests.distributed import dp_work
    from tests.fast.test_gpu_collectives import gpu_group

    gpu_group(rank, world, port)
    cfg = TrainerConfig(lr=1e-3, lr_warmup_ratio=0.0, total_steps=2, max_norm=1.0)
    ds = DSConfig(zero_stage=stage) if stage is not None else DSConfig()
    trainer = build_trainer(load_causal_lm(model_dir), cfg, ds)
    if stage is None:
        trainer.engine = trainer.model  # what dp_work's old-logprob forward calls
    out = dp_work.grpo_step(trainer, 0)
    nbytes = trainer.save(Store.open(store_dir), f"ckpt-{stage}")
    return {"grad_norm": out["grad_norm"], "bytes": nbytes}


@pytest.mark.parametrize("stage", [None, 2, 3])
def test_two_ranks_step_and_checkpoint_on_the_gpu_group(tiny_model_dir, tmp_path, stage):
    results = run_ranks(_train_and_save, 2, str(tiny_model_dir), str(tmp_path), "gpu", stage)
    assert all(isinstance(r, dict) for r in results), results
    assert results[0]["grad_norm"] == pytest.approx(results[1]["grad_norm"])
    assert results[0]["bytes"] > 0  # DeepSpeed: every rank's total; PyTorch: rank 0 writes
    assert results[1]["bytes"] == (0 if stage is None else results[0]["bytes"])
