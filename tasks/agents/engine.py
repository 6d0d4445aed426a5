"""The `llm_engine` an agent's `execute` calls: token ids in, a vLLM-shaped output out.

Every episode of a batch runs as a coroutine on one event loop. A `generate` call parks
its request; once every live episode is parked (or finished), the parked requests go to
the generation engine as one batch, in episode order. The batch is therefore the same
whatever the order the environments answered in, and so are the seeds of its rows — a
resumed task samples the same tokens.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
from collections import defaultdict

from alignflow.tasks.agents.sampling import (
    AgentSamplingParams,
    CompletionOutput,
    Logprob,
    RequestOutput,
)
from alignflow.tasks.engines.base import SamplingParams

EPISODE: contextvars.ContextVar[int] = contextvars.ContextVar("alignflow_episode", default=-1)


class BatchingEngine:
    """Batches the `generate` calls of concurrent episodes onto one engine."""

    def __init__(self, engine, tokenizer, *, seed: int, eos_token_ids: tuple[int, ...],
                 episodes: int) -> None:
        self.engine, self.tokenizer, self.seed = engine, tokenizer, seed
        self.eos = eos_token_ids
        self.live = episodes
        self.parked: dict[int, tuple[list[int], AgentSamplingParams, asyncio.Future]] = {}
        self.flushes = 0

    async def generate(self, token_ids, sampling_params: AgentSamplingParams) -> RequestOutput:
        episode = EPISODE.get()
        future = asyncio.get_running_loop().create_future()
        self.parked[episode] = (list(token_ids), sampling_params, future)
        self._maybe_flush()
        return await future

    def finished(self) -> None:
        """An episode ended (or failed): the others no longer wait for it."""
        self.live -= 1
        self._maybe_flush()

    def _maybe_flush(self) -> None:
        if self.parked and len(self.parked) >= self.live:
            self._flush()

    def _params(self, p: AgentSamplingParams, seed: int) -> SamplingParams:
        return SamplingParams(max_new_tokens=p.max_tokens, temperature=p.temperature,
                              top_p=p.top_p, top_k=max(p.top_k, 0), n=1, stop=tuple(p.stop),
                              eos_token_ids=self.eos, seed=seed)

    def _flush(self) -> None:
        parked, self.parked = sorted(self.parked.items()), {}
        groups: dict[tuple, list] = defaultdict(list)  # one engine call per sampling setting
        for _, (tokens, params, future) in parked:
            setting = (params.max_tokens, params.temperature, params.top_p, params.top_k,
                       tuple(params.stop))
            groups[setting].append((tokens, params, future))
        for n, members in enumerate(groups.values()):
            seed = _seed(self.seed, self.flushes, n)
            samples = self.engine.generate([m[0] for m in members],
                                           self._params(members[0][1], seed))
            for (tokens, _, future), sample in zip(members, samples, strict=True):
                future.set_result(_output(tokens, sample, self.tokenizer))
        self.flushes += 1


def _seed(seed: int, flush: int, group: int) -> int:
    digest = hashlib.sha256(f"{seed}:agent:{flush}:{group}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 62) - 1)


def _output(tokens: list[int], sample, tokenizer) -> RequestOutput:
    ids = list(sample.response_ids)
    logprobs = [{tok: Logprob(lp)} for tok, lp in zip(ids, sample.behaviour_logprobs,
                                                      strict=True)]
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return RequestOutput(tokens, [CompletionOutput(ids, text, logprobs, sample.finish_reason)])
