"""Sample responses with the current policy. Reads: prompts. Commits: rollouts."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa

from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import current_scope
from alignflow.errors import require
from alignflow.tasks.engines.base import GeneratedSample, SamplingParams
from alignflow.tasks.steps import gpu_memory, rollout_engine
from alignflow.tasks.steps.prompts import prompt_batch
from alignflow.tasks.steps.records import StepOutput


@dataclass(frozen=True, kw_only=True)
class RolloutConfig:
    """Sampling (OpenRLHF 0.11's `rollout.*`).

    batch_size: prompts per iteration
    n_samples_per_prompt: responses per prompt (group estimators need >= 2)
    max_new_tokens: response length cap in tokens
    top_k: sample from the k most likely tokens (0: off)
    stop: strings that end a response
    micro_batch_size: prompts per generation forward batch
    engine: hf, vllm, or auto (vLLM where installed and GPUs are placed or vllm.num_engines > 0)
    """

    batch_size: int = 8
    n_samples_per_prompt: int = 4
    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: tuple[str, ...] = ()
    micro_batch_size: int = 16
    engine: rollout_engine.EngineName = "auto"

    def __post_init__(self) -> None:
        for name in ("batch_size", "n_samples_per_prompt", "max_new_tokens", "micro_batch_size"):
            require(getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name))
        require(math.isfinite(self.temperature) and self.temperature >= 0, "temperature",
                "a finite float >= 0", self.temperature)
        require(0.0 < self.top_p <= 1.0, "top_p", "a float in (0, 1]", self.top_p)
        require(self.top_k >= 0, "top_k", "an integer >= 0", self.top_k)
        require(self.engine in ("auto", "hf", "vllm"), "engine", "one of auto, hf, vllm",
                self.engine)
        object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def samples_per_iteration(self) -> int:
        return self.batch_size * self.n_samples_per_prompt

    def sampling(self, seed: int, eos_token_ids: tuple[int, ...]) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                              top_p=self.top_p, top_k=self.top_k, n=self.n_samples_per_prompt,
                              stop=self.stop, eos_token_ids=eos_token_ids, seed=seed)


def eos_ids(tok) -> tuple[int, ...]:
    """The tokenizer's EOS and `<|im_end|>`, whichever exist."""
    ids = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
    return tuple(sorted(i for i in ids if isinstance(i, int) and i >= 0 and i != tok.unk_token_id))


def generate(host, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
             round_: int | None = None) -> StepOutput:
    """One iteration's rollouts: `n_samples_per_prompt` responses for each batch prompt.
    Loops (rejection sampling, iterative DPO) pass their `round_`, stored with each row."""
    scope = current_scope()
    batch = prompt_batch(scope.store, prompts, iteration, cfg.batch_size)
    tok = host.tokenizer
    gpu_memory.start(host)
    samples = rollout_engine.generate(host, batch.column("prompt_ids").to_pylist(),
                                      cfg.sampling(scope.seed, eos_ids(tok)))
    host.engine_idle()
    table = rollout_table(scope, iteration, batch, samples, tok)
    if round_ is not None:
        table = table.append_column("round", pa.array([round_] * table.num_rows, pa.int32()))
    ref = scope.write(ROLLOUTS, table, partition={"iter": iteration})
    lengths = table.column("response_len").to_pylist()
    return StepOutput((ref,), table.num_rows, {
        "response_len_mean": sum(lengths) / len(lengths),
        "truncated_frac": sum(s.finish_reason == "length" for s in samples) / len(samples),
        "tokens": float(sum(lengths)),
    } | gpu_memory.record(scope, host, "actor", iteration))


def rollout_table(scope, iteration: int, batch: pa.Table, samples: list[GeneratedSample],
                  tok) -> pa.Table:
    """The `rollouts` rows of `samples` (one per response), keyed to their prompts."""
    pids = batch.column("prompt_id").to_pylist()
    texts = batch.column("prompt").to_pylist()
    labels = batch.column("label").to_pylist()
    n = len(samples)
    return pa.table({
        "run_id": [scope.run_id] * n,
        "iteration": [iteration] * n,
        "task_key": [scope.task_key] * n,
        "prompt_id": [pids[s.prompt_index] for s in samples],
        "sample_idx": [s.sample_index for s in samples],
        "prompt": [texts[s.prompt_index] for s in samples],
        "response": tok.batch_decode([s.response_ids for s in samples], skip_special_tokens=True),
        "prompt_ids": [s.prompt_ids for s in samples],
        "response_ids": [s.response_ids for s in samples],
        "behaviour_logprobs": [s.behaviour_logprobs for s in samples],
        "prompt_len": [len(s.prompt_ids) for s in samples],
        "response_len": [len(s.response_ids) for s in samples],
        "finish_reason": [s.finish_reason for s in samples],
        "policy_version": [s.policy_version for s in samples],
        "label": [labels[s.prompt_index] for s in samples],
    })
