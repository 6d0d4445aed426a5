"""ZeRO's buckets sized to the model (`tasks/trainers/deepspeed/config.model_buckets`):
DeepSpeed's own sizes (5e8 elements to reduce, 5e7 to prefetch at stage 3: what OpenRLHF's
"auto" leaves), no larger than the trainable parameters. The Transformers integration's
hidden²-element buckets made ZeRO-2's step 2.2-2.4x the plain loop on an H100 (1.4-1.5x
now) and the tiny model's ZeRO-3 step 5.9x on the CPU (3.4x); DeepSpeed's sizes uncapped are
a 2 GB buffer per engine whatever the model (the CPU suite's process, holding one per ZeRO-3
engine it built, grew a 26 GB mapping and could no longer fork)."""

from __future__ import annotations

import torch

from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.deepspeed.config import (
    DEEPSPEED_PREFETCH_BUCKET,
    DEEPSPEED_REDUCE_BUCKET,
    ds_config,
)
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.deepspeed.trainer import param_counts


def _zero(stage: int, **kw) -> dict:
    return ds_config(TrainerConfig(), DSConfig(zero_stage=stage), pin_memory=False,
                     **kw)["zero_optimization"]


def test_buckets_are_deepspeeds_no_larger_than_the_model():
    for stage in (1, 2, 3):
        small, big = _zero(stage, trainable=106_816), _zero(stage, trainable=7 * 10**9)
        assert small["reduce_bucket_size"] == 106_816
        assert big["reduce_bucket_size"] == DEEPSPEED_REDUCE_BUCKET == 500_000_000
        assert ("stage3_prefetch_bucket_size" in small) == (stage == 3)
    assert _zero(3, trainable=106_816)["stage3_prefetch_bucket_size"] == 106_816
    assert _zero(3, trainable=7 * 10**9)["stage3_prefetch_bucket_size"] \
        == DEEPSPEED_PREFETCH_BUCKET == 50_000_000
    assert "reduce_bucket_size" not in _zero(0, trainable=106_816)
    assert "reduce_bucket_size" not in _zero(3)  # no model size known: DeepSpeed's own
    lora = _zero(3, trainable=10**6, params=7 * 10**9)  # a frozen base is prefetched too
    assert (lora["reduce_bucket_size"], lora["stage3_prefetch_bucket_size"]) \
        == (10**6, DEEPSPEED_PREFETCH_BUCKET)


def test_the_users_overrides_win():
    for stage in (2, 3):
        zero = _zero(stage, trainable=10**6,
                     overrides={"zero_optimization": {"reduce_bucket_size": 123}})
        assert zero["reduce_bucket_size"] == 123


def test_a_partitioned_parameter_counts_whole_and_a_frozen_one_only_in_the_total():
    lin, frozen = torch.nn.Linear(4, 3), torch.nn.Linear(2, 2)
    frozen.requires_grad_(False)
    lin.weight.ds_numel = 1000  # as zero.Init leaves it: the data elsewhere, its size here
    assert param_counts(torch.nn.Sequential(lin, frozen)) == {"trainable": 1000 + 3,
                                                              "params": 1000 + 3 + 6}
