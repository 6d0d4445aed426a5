"""The RL config's checks across sections (called once by `RLConfig.__post_init__`): each
refuses, in one line naming the key, a combination the run cannot honour."""

from __future__ import annotations

from typing import Any

from alignflow.errors import require


def check(cfg: Any) -> None:
    check_refill(cfg)
    check_ema(cfg)


def check_refill(cfg: Any) -> None:
    """Over-sampling feeds dynamic filtering's refills (`flows/rl/refill.py`); a generator
    worker generates batch by batch ahead of learning whatever it is (as OpenRLHF, which
    wants an asynchronous run for it, serves the extra samples to the next steps)."""
    over = cfg.rollout.vllm_generate_batch_size
    if over is None or over == cfg.rollout.batch_size:
        return
    require(cfg.refills or cfg.uses_generator, "rollout.vllm_generate_batch_size",
            "null (or rollout.batch_size) in a synchronous run without "
            "algo.dynamic_filtering_enable (OpenRLHF asks for --async_train)", over)


def check_ema(cfg: Any) -> None:
    """The EMA averages every trained weight held in full (not adapters, not shards)."""
    if not cfg.train.enable_ema:
        return
    require(not cfg.ds.lora.enabled, "train.enable_ema",
            "false with ds.lora.rank > 0 (the average is of full weights)", True)
    require(cfg.ds.zero_stage != 3, "train.enable_ema",
            "false with ds.zero_stage=3 (the average needs whole weights on each rank)", True)
