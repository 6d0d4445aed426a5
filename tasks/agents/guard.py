"""Calling a user's environment: a time limit per call, and one clear error when it raises,
hangs or answers something malformed.

An environment's `reset`/`step` are coroutines, but nothing stops them from blocking
(`time.sleep`, a socket without a timeout); a blocked coroutine would stall every episode
sharing the event loop. So each call runs on a daemon thread with its own event loop, and
the episode stops waiting after `timeout` seconds (the thread is abandoned, never joined).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import math
import threading
from collections.abc import Coroutine, Mapping
from typing import Any

from alignflow.errors import ConfigError


class AgentError(ConfigError):
    """An agent file or its environment misbehaved (a user fault: not retried)."""


def _run(coro: Coroutine, out: concurrent.futures.Future) -> None:
    try:
        result, error = asyncio.run(coro), None
    except BaseException as exc:  # handed to the waiting episode
        result, error = None, exc
    # after a timeout the episode stopped waiting: nobody reads the answer
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        out.set_result(result) if error is None else out.set_exception(error)


async def call_env(coro: Coroutine, *, timeout: float, what: str) -> Any:
    """Await `coro` on its own thread for at most `timeout` s; errors name `what`."""
    if not asyncio.iscoroutine(coro):
        raise AgentError(f"{what} is not a coroutine; expected `async def` (OpenRLHF's API)")
    out: concurrent.futures.Future = concurrent.futures.Future()
    threading.Thread(target=_run, args=(coro, out), daemon=True,
                     name="alignflow-agent-env").start()
    try:
        return await asyncio.wait_for(asyncio.wrap_future(out), timeout)
    except TimeoutError:
        raise AgentError(f"{what} did not return within agent.step_timeout={timeout:g}s") from None
    except AgentError:
        raise
    except Exception as exc:
        raise AgentError(f"{what} raised {type(exc).__name__}: {exc}") from exc


def as_number(value: Any, what: str) -> float:
    """A finite float from a number, a one-element tensor/array, or `.item()`-able value."""
    if hasattr(value, "item") and getattr(value, "numel", lambda: 1)() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AgentError(f"{what} is {value!r}; expected a finite number (or a one-element "
                         "tensor)")
    return float(value)


def step_result(result: Any, what: str) -> dict[str, Any]:
    """A checked `step` answer: rewards, environment_feedback, done (+ optional keys)."""
    if not isinstance(result, Mapping):
        raise AgentError(f"{what} returned a {type(result).__name__}; expected a dict with "
                         "rewards, environment_feedback and done")
    missing = [k for k in ("rewards", "environment_feedback", "done") if k not in result]
    if missing:
        raise AgentError(f"{what} returned no {', '.join(missing)}; expected a dict with "
                         "rewards, environment_feedback and done")
    if not isinstance(result["environment_feedback"], str):
        raise AgentError(f"{what}: environment_feedback is a "
                         f"{type(result['environment_feedback']).__name__}; expected text")
    done = result["done"]
    if hasattr(done, "item"):
        done = done.item()
    if not isinstance(done, bool | int):
        raise AgentError(f"{what}: done is {done!r}; expected True or False")
    logs = result.get("extra_logs") or {}
    if not isinstance(logs, Mapping):
        raise AgentError(f"{what}: extra_logs is a {type(logs).__name__}; expected a dict")
    return {**result, "rewards": as_number(result["rewards"], f"{what}: rewards"),
            "done": bool(done), "extra_logs": dict(logs)}
