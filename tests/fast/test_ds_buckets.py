"""ZeRO's buckets sized to the model (`tasks/trainers/deepspeed/config.model_buckets`), as
the Transformers integration fills "auto": DeepSpeed's fixed 5e8-element default is a 2 GB
buffer per ZeRO-3 engine whatever the model (the CPU suite's process, holding one per
engine it built, grew a 26 GB mapping and could no longer fork)."""

from __future__ import annotations

from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.deepspeed.config import ds_config
from alignflow.tasks.trainers.deepspeed.section import DSConfig


def _zero(stage: int, **kw) -> dict:
    return ds_config(TrainerConfig(), DSConfig(zero_stage=stage), pin_memory=False,
                     **kw)["zero_optimization"]


def test_buckets_follow_the_hidden_size_and_the_stage():
    assert _zero(3, hidden_size=64) == {"stage": 3, "overlap_comm": False,
                                        "reduce_bucket_size": 4096,
                                        "stage3_prefetch_bucket_size": 3686}
    assert _zero(2, hidden_size=4096)["reduce_bucket_size"] == 4096 * 4096
    assert "stage3_prefetch_bucket_size" not in _zero(2, hidden_size=4096)
    assert "reduce_bucket_size" not in _zero(3)  # no model size known: DeepSpeed's own


def test_the_users_overrides_win():
    zero = _zero(3, hidden_size=64, overrides={"zero_optimization":
                                               {"reduce_bucket_size": 500_000_000}})
    assert zero["reduce_bucket_size"] == 500_000_000
