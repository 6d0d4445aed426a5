"""Remote HTTP reward model client (`remote_rm_url`), OpenRLHF's wire format.

Request: POST JSON `{"query": [...], "prompts": [...], "labels": [...]}` (query = prompt +
response). Reply: `{"rewards": [...], "scores": ..., "extra_logs": {...}}` or a plain list of
rewards. Connection faults, timeouts, 429 and 5xx are retried with exponential backoff,
all within `budget` seconds per `score()` call (one batch, all its micro-batches): no
request outlives the budget, and when it is spent — or the tries are used up — the batch
fails with one line (`RewardServerError`). That error is not retried by the engine on top
(the client already retried), so a hanging server costs at most `budget`, not tries ×
engine retries × timeout. A bad reply (not JSON, too big, wrong length, no `rewards`, not
numbers) is a one-line ConfigError naming the URL, because retrying would not fix it. What
the server said (an error reply's head) is quoted masked: it may echo a credential.
Stdlib only (urllib).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from alignflow.artifacts.redact import expand, redact
from alignflow.errors import AlignflowError, ConfigError, Kind
from alignflow.tasks.rewards.base import (
    RewardOutput,
    check_batch,
    merge_outputs,
    split_logs,
    to_vector,
    to_vectors,
)

MAX_REPLY_BYTES = 16 * 1024 * 1024
HEAD_BYTES = 200  # of an error reply's body, quoted in the error


def _said(exc: urllib.error.HTTPError) -> str:
    """An error reply's reason and the head of its body, masked (a server may quote back
    the credential it refused)."""
    try:
        body = exc.read(HEAD_BYTES).decode("utf-8", "replace")
    except Exception:  # a body that cannot be read is left out
        body = ""
    head = " ".join(body.split())
    return redact(f"{exc.reason}" + (f" ({head!r})" if head else "")) or ""


class RewardServerError(AlignflowError, ConnectionError):
    """The reward server could not be reached, or kept failing, within the batch's budget.
    Not retried by the engine (the client has retried already): the run fails, resumable
    once the server answers."""

    kind: Kind = "user"


@dataclass(frozen=True, kw_only=True)
class RemoteRewardModel:
    """POSTs micro-batches to `url`; `micro_batch=0` sends the whole batch at once."""

    url: str
    timeout: float = 60.0
    retries: int = 3
    budget: float = 300.0
    backoff: float = 0.5
    max_bytes: int = MAX_REPLY_BYTES
    micro_batch: int = 0
    score_key: str = "rewards"

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"remote_rm_url {self.url!r} is not an http(s) URL")
        if min(self.timeout, self.budget, self.max_bytes) <= 0 or min(self.retries,
                                                                      self.micro_batch) < 0:
            raise ConfigError(f"remote reward model {self.url}: timeout, budget and max_bytes "
                              f"must be > 0, retries and micro_batch >= 0")

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        step = self.micro_batch or max(1, len(queries))
        deadline = time.monotonic() + self.budget
        parts = [self._score_chunk(queries[i:i + step], prompts[i:i + step],
                                   labels[i:i + step], deadline)
                 for i in range(0, len(queries), step)]
        if not parts:
            return RewardOutput(torch.zeros(0, dtype=torch.float32))
        return merge_outputs(parts, [len(p.rewards) for p in parts])

    def _score_chunk(self, queries: list[str], prompts: list[str],
                     labels: list[str | None], deadline: float) -> RewardOutput:
        body = json.dumps({"query": queries, "prompts": prompts, "labels": labels}).encode()
        return self._parse(self._post(body, deadline), len(queries))

    def _post(self, body: bytes, deadline: float) -> bytes:
        """POST with retries on connection faults, timeouts, 429 and 5xx, until `deadline`."""
        last, tries = "", 0
        for attempt in range(self.retries + 1):
            pause = self.backoff * 2 ** (attempt - 1) if attempt else 0.0
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
            tries += 1
            try:
                return self._post_once(body, deadline - time.monotonic())
            except urllib.error.HTTPError as exc:
                if exc.code != 429 and exc.code < 500:
                    raise ConfigError(f"reward server {self.url} answered HTTP {exc.code} "
                                      f"{_said(exc)}; expected 200 with JSON rewards") from None
                last = f"HTTP {exc.code} {_said(exc)}"
            except (OSError, TimeoutError) as exc:  # URLError, refused, reset, timed out
                reason = getattr(exc, "reason", exc)
                last = redact(f"{type(reason).__name__}: {reason}")
        spent = "the batch's time budget ran out" if tries <= self.retries else "no try left"
        raise RewardServerError(f"reward server {self.url} failed {tries} times within "
                                f"{self.budget:g} s ({spent}; last: {last or 'none'}); "
                                "expected a reachable server (reward.remote_budget sets "
                                "the budget)")

    def _post_once(self, body: bytes, left: float) -> bytes:
        """One request; its socket timeout never reaches past the batch's deadline."""
        request = urllib.request.Request(
            expand(self.url, "reward.remote_url"), data=body, method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=max(0.001, min(self.timeout, left))) \
                as response:
            length = response.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > self.max_bytes:
                self._too_big()
            data = response.read(self.max_bytes + 1)  # never holds more than the limit
        if len(data) > self.max_bytes:
            self._too_big()
        return data

    def _too_big(self) -> None:
        raise ConfigError(f"reward server {self.url} sent a reply over {self.max_bytes} bytes; "
                          f"expected a smaller JSON reply (raise max_bytes?)")

    def _parse(self, data: bytes, n: int) -> RewardOutput:
        where = f"reward server {self.url}"
        try:
            reply = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            head = redact(data[:60].decode("utf-8", "replace").replace("\n", " "))
            raise ConfigError(f"{where} replied with non-JSON ({head!r}); "
                              f"expected {{\"{self.score_key}\": [...]}}") from None
        if not isinstance(reply, Mapping):
            return RewardOutput(to_vector(reply, n, what="rewards", where=where))
        if self.score_key not in reply:
            raise ConfigError(f"{where} reply has no {self.score_key!r} key (keys: "
                              f"{sorted(reply)[:8]}); expected {{\"{self.score_key}\": [...]}}")
        scores = reply.get("scores")
        per_sample, batch = split_logs(reply.get("extra_logs"), n, where=where)
        return RewardOutput(
            to_vector(reply[self.score_key], n, what="rewards", where=where),
            to_vectors(scores, n, what="scores", where=where) if isinstance(scores, Mapping)
            or scores is None else {"score": to_vector(scores, n, what="scores", where=where)},
            per_sample, batch)
