"""Sampling settings (`rollout.*`) and the response budgets they give: read by the flow's
driver when it checks a config, apart from the generate step (`generate.py`) and its
engines so that the driver imports no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from alignflow.errors import ConfigError, require
from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.plan.rules import EngineName

METRICS = ("response_len_mean", "truncated_frac", "tokens")  # each generate step's metrics


@dataclass(frozen=True, kw_only=True)
class RolloutConfig:
    """Sampling (OpenRLHF 0.11's `rollout.*`).

    batch_size: prompts per iteration
    n_samples_per_prompt: responses per prompt (group estimators need >= 2)
    max_new_tokens: response length cap in tokens (null: each prompt gets data.max_len minus its length, as OpenRLHF)
    top_k: sample from the k most likely tokens (0: off)
    stop: strings that end a response
    micro_batch_size: prompts per generation forward batch (and samples per reference / value pass)
    engine: hf, vllm, or auto (vLLM where installed and GPUs are placed or vllm.num_engines > 0)
    max_tokens_per_gpu: with train.dynamic_batch_enable, prompt + response tokens of one reference / value / log-prob pass (null: train.max_tokens_per_gpu)
    vllm_generate_batch_size: with algo.dynamic_filtering_enable, prompts drawn per round: rounds go on until batch_size groups pass the filter, the first batch_size are trained on (null: batch_size); an asynchronous run generates batch_size prompts per iteration ahead of learning whatever it is
    """

    batch_size: int = 1024
    n_samples_per_prompt: int = 1
    max_new_tokens: int | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    micro_batch_size: int = 1
    engine: EngineName = "auto"
    max_tokens_per_gpu: int | None = None
    vllm_generate_batch_size: int | None = None

    def __post_init__(self) -> None:
        if self.vllm_generate_batch_size is not None:
            require(self.vllm_generate_batch_size >= self.batch_size, "vllm_generate_batch_size",
                    f"an integer >= batch_size={self.batch_size} or null",
                    self.vllm_generate_batch_size)
        if self.max_tokens_per_gpu is not None:
            require(self.max_tokens_per_gpu >= 1, "max_tokens_per_gpu", "an integer >= 1 or null",
                    self.max_tokens_per_gpu)
        for name in ("batch_size", "n_samples_per_prompt", "micro_batch_size"):
            require(getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name))
        if self.max_new_tokens is not None:
            require(self.max_new_tokens >= 1, "max_new_tokens", "an integer >= 1 or null",
                    self.max_new_tokens)
        require(math.isfinite(self.temperature) and self.temperature >= 0, "temperature",
                "a finite float >= 0", self.temperature)
        require(0.0 < self.top_p <= 1.0, "top_p", "a float in (0, 1]", self.top_p)
        require(self.top_k >= 0, "top_k", "an integer >= 0", self.top_k)
        require(self.engine in ("auto", "hf", "vllm"), "engine", "one of auto, hf, vllm",
                self.engine)
        object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def prompts_per_round(self) -> int:
        """Prompts drawn per generation round (over-sampling for dynamic filtering)."""
        return self.vllm_generate_batch_size or self.batch_size

    @property
    def samples_per_iteration(self) -> int:
        return self.batch_size * self.n_samples_per_prompt

    def sampling(self, seed: int, eos_token_ids: tuple[int, ...],
                 max_new_tokens: int | None = None) -> SamplingParams:
        return SamplingParams(max_new_tokens=max_new_tokens or self.max_new_tokens,
                              temperature=self.temperature,
                              top_p=self.top_p, top_k=self.top_k, n=self.n_samples_per_prompt,
                              stop=self.stop, eos_token_ids=eos_token_ids, seed=seed)


def check_lengths(rollout: RolloutConfig, max_len: int | None) -> None:
    """data.max_len (the total) must leave room for max_new_tokens, and exist when
    max_new_tokens is null."""
    new = rollout.max_new_tokens
    if new is None:
        require(max_len is not None, "data.max_len",
                "a total length when rollout.max_new_tokens is null", max_len)
    elif max_len is not None:
        require(max_len > new, "data.max_len", f"more than rollout.max_new_tokens={new}",
                max_len)


def budgets(prompt_ids: list[list[int]], cfg: RolloutConfig, max_len: int | None) -> list[int]:
    """Response tokens each prompt may have: `max_new_tokens`, or (when it is null)
    `max_len` minus the prompt's length, at least 1 (OpenRLHF's per-prompt budget)."""
    if cfg.max_new_tokens is not None:
        return [cfg.max_new_tokens] * len(prompt_ids)
    if max_len is None:
        raise ConfigError("rollout.max_new_tokens=null needs data.max_len (the total length)")
    return [max(1, max_len - len(p)) for p in prompt_ids]
