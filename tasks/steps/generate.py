"""Sample responses with the current policy. Reads: prompts. Commits: rollouts."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pyarrow as pa

from alignflow.artifacts.schemas import ROLLOUTS
from alignflow.artifacts.scope import current_scope
from alignflow.errors import ConfigError, require
from alignflow.tasks.engines.base import GeneratedSample, SamplingParams
from alignflow.tasks.plan.rules import EngineName
from alignflow.tasks.steps import gpu_memory, rollout_engine
from alignflow.tasks.steps.host_api import Generator
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.steps.prompts import prompt_batch
from alignflow.tasks.steps.records import StepOutput

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


def eos_ids(tok) -> tuple[int, ...]:
    """The tokenizer's EOS and `<|im_end|>`, whichever exist."""
    ids = {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
    return tuple(sorted(i for i in ids if isinstance(i, int) and i >= 0 and i != tok.unk_token_id))


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


def cut_to_budget(sample: GeneratedSample, budget: int) -> GeneratedSample:
    """A sample generated under a larger shared limit, cut to its own budget. Exact: each
    sample draws from its own seeded generator, so its first tokens do not depend on the
    limit."""
    if len(sample.response_ids) <= budget:
        return sample
    return dataclasses.replace(sample, response_ids=sample.response_ids[:budget],
                               behaviour_logprobs=sample.behaviour_logprobs[:budget],
                               finish_reason="length")


def generate(host: Generator, prompts: StepOutput, iteration: int, cfg: RolloutConfig,
             round_: int | None = None, max_len: int | None = None,
             start: int | None = None, quiet: bool = False) -> StepOutput:
    """One iteration's rollouts: `n_samples_per_prompt` responses for each batch prompt.
    Loops (rejection sampling, iterative DPO) pass their `round_`, stored with each row;
    `max_len` (data.max_len) sizes each prompt's budget when max_new_tokens is null;
    `start`: the first prompt drawn (default: the iteration's share); `quiet`: a refill
    round after the first writes no metrics of the iteration."""
    if not rollout_engine.drives(host):  # rank 0 of the host generates for all of it
        rollout_engine.follow(host)
        return StepOutput((), 0, {})
    scope = current_scope()
    batch = prompt_batch(scope.store, prompts, iteration, cfg.batch_size, start)
    tok = host.tokenizer
    gpu_memory.start(host)
    prompt_ids = batch.column("prompt_ids").to_pylist()
    limits = budgets(prompt_ids, cfg, max_len)
    samples = rollout_engine.generate(host, prompt_ids,
                                      cfg.sampling(scope.seed, eos_ids(tok), max(limits)))
    samples = [cut_to_budget(s, limits[s.prompt_index]) for s in samples]
    host.engine_idle()
    table = rollout_table(scope, iteration, batch, samples, tok)
    if round_ is not None:
        table = table.append_column("round", pa.array([round_] * table.num_rows, pa.int32()))
    ref = scope.write(ROLLOUTS, table, partition={"iter": iteration})
    lengths = table.column("response_len").to_pylist()
    values = (sum(lengths) / len(lengths),
              sum(s.finish_reason == "length" for s in samples) / len(samples),
              float(sum(lengths)))
    metrics = dict(zip(METRICS, values, strict=True)) | gpu_memory.peak_metrics(host, "actor")
    if not quiet:
        write_metrics(scope, [(iteration, metrics)], partition={"iter": iteration})
    return StepOutput((ref,), table.num_rows, metrics)


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
