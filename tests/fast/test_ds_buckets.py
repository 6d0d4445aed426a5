"""ZeRO's buckets sized to the model (`tasks/trainers/deepspeed/config.model_buckets`):
stages 1-2 take DeepSpeed's one 5e8-element bucket, no larger than the trainable
parameters (hidden²-sized buckets, ~280 flushes a micro-batch for a 164M Llama, made
ZeRO-2's step 2.2-2.4x the plain loop on an H100, one bucket 1.5x); stage 3 keeps the
Transformers integration's "auto" (DeepSpeed's fixed default is a 2 GB buffer per ZeRO-3
engine whatever the model: the CPU suite's process grew a 26 GB mapping and could no
longer fork)."""

from __future__ import annotations

from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.deepspeed.config import DEEPSPEED_REDUCE_BUCKET, ds_config
from alignflow.tasks.trainers.deepspeed.section import DSConfig


def _zero(stage: int, **kw) -> dict:
    return ds_config(TrainerConfig(), DSConfig(zero_stage=stage), pin_memory=False,
                     **kw)["zero_optimization"]


def test_stage_3_buckets_follow_the_hidden_size():
    assert _zero(3, hidden_size=64, trainable=10**9) == {
        "stage": 3, "overlap_comm": False, "reduce_bucket_size": 4096,
        "stage3_prefetch_bucket_size": 3686}
    assert "reduce_bucket_size" not in _zero(3)  # no model size known: DeepSpeed's own


def test_stages_1_and_2_reduce_in_one_bucket_no_larger_than_the_model():
    for stage in (1, 2):
        small = _zero(stage, hidden_size=64, trainable=106_816)
        assert small["reduce_bucket_size"] == 106_816
        assert "stage3_prefetch_bucket_size" not in small
        big = _zero(stage, hidden_size=4096, trainable=7_000_000_000)
        assert big["reduce_bucket_size"] == DEEPSPEED_REDUCE_BUCKET == 500_000_000
    assert "reduce_bucket_size" not in _zero(0, hidden_size=64, trainable=106_816)


def test_the_users_overrides_win():
    for stage in (2, 3):
        zero = _zero(stage, hidden_size=64, trainable=10**6,
                     overrides={"zero_optimization": {"reduce_bucket_size": 123}})
        assert zero["reduce_bucket_size"] == 123
