"""The vLLM-shaped values an OpenRLHF agent file sees: the sampling parameters it is handed
and passes back to `llm_engine.generate`, and the request output that call returns
(`outputs[0].token_ids`, `.text`, `.logprobs[i][token].logprob`). alignflow's engines
answer with these shapes, so an agent written for OpenRLHF runs unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AgentSamplingParams:
    """vLLM's `SamplingParams` fields an agent reads or sets (mutable, like vLLM's)."""

    max_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    logprobs: int | None = 1
    stop: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Logprob:
    logprob: float


@dataclass(frozen=True)
class CompletionOutput:
    """One sampled continuation: its token ids, text and per-token log-probs."""

    token_ids: list[int]
    text: str
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str


@dataclass(frozen=True)
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
