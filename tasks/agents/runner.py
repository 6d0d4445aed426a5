"""Run a batch of agent episodes and check what each `execute` returned.

OpenRLHF's contract for `AgentExecutor.execute(...)`: a dict with `observation_tokens`
(every token id of the episode), `action_ranges` (the [start, end) spans the policy
produced — the only tokens with loss), `rollout_log_probs` (aligned with the tokens; 0 on
the environment's), `reward`, optional `scores`, `extra_logs`. Anything else is a one-line
`AgentError` naming the episode and the field.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from alignflow.tasks.agents.engine import EPISODE, BatchingEngine
from alignflow.tasks.agents.guard import AgentError, as_number
from alignflow.tasks.agents.sampling import AgentSamplingParams


@dataclass(frozen=True)
class Episode:
    """One checked episode, split where the policy first acted."""

    prompt_ids: list[int]
    response_ids: list[int]
    action_mask: list[int]
    logprobs: list[float]
    reward: float
    extra_logs: dict[str, float]
    turns: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    score: float | None = None  # OpenRLHF's `scores` (dynamic filtering); None: the reward


def run_episodes(executor, requests: list[tuple[str, str | None]], engine: BatchingEngine,
                 tokenizer, params: AgentSamplingParams, max_length: int) -> list[Episode]:
    """Every (prompt, label) request as one episode, all on one event loop."""
    return asyncio.run(_all(executor, requests, engine, tokenizer, params, max_length))


async def _all(executor, requests, engine, tokenizer, params, max_length) -> list[Episode]:
    tasks = [asyncio.create_task(_one(i, executor, prompt, label, engine, tokenizer, params,
                                      max_length))
             for i, (prompt, label) in enumerate(requests)]
    done = await asyncio.gather(*tasks, return_exceptions=True)
    for out in done:  # the first failed episode by index, whichever failed first in time
        if isinstance(out, BaseException):
            raise out
    return list(done)


async def _one(i: int, executor, prompt: str, label, engine: BatchingEngine, tokenizer,
               params: AgentSamplingParams, max_length: int) -> Episode:
    EPISODE.set(i)
    try:
        out = await executor.execute(prompt, label, copy.deepcopy(params), max_length,
                                     tokenizer, engine)
    except AgentError as exc:
        raise AgentError(f"episode {i}: {exc}") from exc
    except Exception as exc:
        raise AgentError(f"episode {i}: AgentExecutor.execute raised {type(exc).__name__}: "
                         f"{exc}") from exc
    finally:
        engine.finished()
    return check_episode(out, f"episode {i}", tokenizer)


def _ranges(value: Any, n: int, where: str) -> list[tuple[int, int]]:
    try:
        ranges = [(int(a), int(b)) for a, b in value]
    except (TypeError, ValueError):
        raise AgentError(f"{where}: action_ranges is {value!r}; expected [(start, end), ...]"
                         ) from None
    ends = [0] + [e for _, e in ranges]
    if not ranges or any(not (ends[k] <= s <= e <= n) for k, (s, e) in enumerate(ranges)):
        raise AgentError(f"{where}: action_ranges {ranges} are not increasing spans within "
                         f"the {n} observation tokens (or there is none)")
    return ranges


def _turns(out: Mapping, tokens: list[int], ranges, tokenizer) -> list[dict[str, Any]]:
    """alignflow's executor records each turn; for others the ranges tell the turns."""
    if isinstance(out.get("turns"), list):
        return out["turns"]
    bounds = [s for s, _ in ranges[1:]] + [len(tokens)]
    return [{"action": tokenizer.decode(tokens[s:e], skip_special_tokens=True),
             "feedback": tokenizer.decode(tokens[e:nxt], skip_special_tokens=True),
             "reward": None, "done": None, "action_tokens": e - s, "feedback_tokens": nxt - e}
            for (s, e), nxt in zip(ranges, bounds, strict=True)]


def check_episode(out: Any, where: str, tokenizer) -> Episode:
    """An `Episode` from one `execute` result, or an `AgentError` naming the fault."""
    if not isinstance(out, Mapping):
        raise AgentError(f"{where}: execute returned a {type(out).__name__}; expected a dict")
    tokens = out.get("observation_tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
        raise AgentError(f"{where}: observation_tokens is not a list of token ids")
    ranges = _ranges(out.get("action_ranges"), len(tokens), where)
    logprobs = out.get("rollout_log_probs")
    if not isinstance(logprobs, list) or len(logprobs) != len(tokens):
        raise AgentError(f"{where}: rollout_log_probs must list one log-prob per observation "
                         "token (the learner needs the behaviour log-probs); pass the "
                         "sampling_params you were given to llm_engine.generate")
    start = ranges[0][0]
    mask = [0] * (len(tokens) - start)
    for s, e in ranges:
        mask[s - start:e - start] = [1] * (e - s)
    logs = out.get("extra_logs") or {}
    return Episode(prompt_ids=tokens[:start], response_ids=tokens[start:], action_mask=mask,
                   logprobs=[float(x) for x in logprobs[start:]],
                   reward=as_number(out.get("reward"), f"{where}: reward"),
                   extra_logs={k: as_number(v, f"{where}: extra_logs[{k!r}]")
                               for k, v in dict(logs).items()},
                   turns=_turns(out, tokens, ranges, tokenizer), done=bool(out.get("done")),
                   score=None if out.get("scores") is None
                   else as_number(out.get("scores"), f"{where}: scores"))
