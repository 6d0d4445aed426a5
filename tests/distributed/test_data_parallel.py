"""Two gloo ranks on half the batch each equal one rank on the whole batch: a GRPO-style
token-mean step (ZeRO-2) and a DPO step (ZeRO-3) on the tiny model, ranks as Ray actors."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("deepspeed")

from alignflow.tasks.advantages.normalize import whiten
from alignflow.tasks.distributed.ray_group import GroupMember, form_group
from tests.distributed import dp_work

pytestmark = pytest.mark.slow
STEPS = 2


class Worker(GroupMember):
    """One data-parallel rank holding a DeepSpeedTrainer on the tiny model."""

    def __init__(self, model_dir: str) -> None:
        torch.set_num_threads(1)
        self.model_dir = model_dir

    def train(self, kind: str, stage: int) -> dict:
        from alignflow.tasks.modeling.loading import load_causal_lm
        from alignflow.tasks.trainers.base import TrainerConfig
        from alignflow.tasks.trainers.deepspeed.section import DSConfig
        from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

        model = load_causal_lm(self.model_dir)
        ref = dp_work.dpo_reference(model, 0) if kind == "dpo" else None
        cfg = TrainerConfig(lr=1e-3, lr_warmup_ratio=0.0, total_steps=STEPS, max_norm=1.0)
        trainer = DeepSpeedTrainer(model, cfg, DSConfig(zero_stage=stage), overrides={
            "zero_optimization": {"stage3_param_persistence_threshold": 0}})
        norms = []
        for step in range(STEPS):
            out = (dp_work.grpo_step(trainer, step) if kind == "grpo"
                   else dp_work.dpo_step(trainer, step, ref))
            norms.append(out["grad_norm"])
        return {"norms": norms, "weights": dict(trainer.state_dict_for_sync()),
                "whitened": dp_work.whitened_shard(0)}


def _run(ray, model_dir: str, world: int, kind: str, stage: int) -> list[dict]:
    actor_cls = ray.remote(num_cpus=1)(Worker)
    actors = [actor_cls.remote(model_dir) for _ in range(world)]
    try:
        form_group(actors, backend="gloo")
        return ray.get([a.train.remote(kind, stage) for a in actors])
    finally:
        for actor in actors:
            ray.kill(actor)


@pytest.mark.parametrize(("kind", "stage"), [("grpo", 2), ("dpo", 3)])
def test_two_workers_on_half_batches_equal_one_on_the_batch(ray_local, tiny_model_dir, kind,
                                                           stage):
    one = _run(ray_local, str(tiny_model_dir), 1, kind, stage)
    two = _run(ray_local, str(tiny_model_dir), 2, kind, stage)
    assert one[0]["norms"] == pytest.approx(two[0]["norms"], rel=1e-5)
    assert two[0]["norms"] == two[1]["norms"]  # the norm is global
    for name, p in one[0]["weights"].items():
        torch.testing.assert_close(two[0]["weights"][name], p, atol=1e-6, rtol=0, msg=name)
        assert torch.equal(two[0]["weights"][name], two[1]["weights"][name]), name
    full = dp_work.grpo_batch(0)
    expected = whiten(full["reward"][:, None] * full["mask"] + full["mask"], full["mask"])
    torch.testing.assert_close(torch.cat([two[0]["whitened"], two[1]["whitened"]]), expected)
    torch.testing.assert_close(one[0]["whitened"], expected)
