"""When an engine is hung: it stopped making progress, never because a generate is long.

A generate of long chains of thought runs as long as it runs (ProRL v2's 512 prompts × 16
samples of up to 9k tokens outlast ten minutes as a matter of course), and OpenRLHF waits
for it with no deadline. A deadline on the whole call killed such an engine, restarted it
and retried the same work, which outlasted the deadline again. So the host waits while
each engine makes progress: its count of sampled tokens and finished sequences
(`progress()`, answered on the actor's own thread while generate runs: `vllm_progress`)
goes up. An engine whose count has not changed for `window_s` seconds, or that stopped
answering, is hung: killed and started again, as before. `vllm.generate_timeout_s` is that
window (the key is kept so configs keep working; it no longer bounds a generate's length).

`wait_alive` takes its waits and its asking as functions, so a test drives it with a fake
clock; `AskActors` asks engine actors through Ray.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

POLL_S = 0.25  # how often the owner looks at the calls and asks for progress
SAY_EVERY_S = 10.0  # how often a long wait says what it waits for

Key = Hashable


@dataclass
class Watch:
    """When each engine's progress last changed, as its owner saw it."""

    window_s: float
    seen: dict[Key, tuple[object, float]] = field(default_factory=dict)  # (count, since)

    def saw(self, key: Key, progress: object, now: float) -> None:
        last = self.seen.get(key)
        if last is None or last[0] != progress:
            self.seen[key] = (progress, now)

    def quiet_for(self, key: Key, now: float) -> float:
        """Seconds since `key`'s progress last changed."""
        return now - self.seen[key][1]

    def stalled(self, keys: Iterable[Key], now: float) -> list[Key]:
        return [key for key in keys if self.quiet_for(key, now) > self.window_s]


def wait_alive(keys: Iterable[Key], window_s: float, *,
               wait: Callable[[list[Key], float], Iterable[Key]],
               ask: Callable[[list[Key]], dict[Key, object]],
               clock: Callable[[], float] = time.monotonic,
               say: Callable[[list[Key], float, float], None] | None = None,
               ) -> tuple[set[Key], set[Key]]:
    """Waits until each key's call is over or its engine made no progress for `window_s`.
    `wait(pending, seconds)`: the keys whose call is over (answered or lost), waiting at most
    `seconds`; `ask(pending)`: {key: progress} of the engines that answered. The clock is read
    once per round, before asking, so a count that moved is never taken for a stall.
    `say(pending, seconds waited, longest quiet)` every `SAY_EVERY_S`. Returns (keys over,
    keys hung)."""
    watch, pending = Watch(window_s), list(keys)
    start = said = clock()
    for key in pending:
        watch.saw(key, None, start)
    over: set[Key] = set()
    hung: set[Key] = set()
    while pending:
        over.update(wait(pending, POLL_S))
        pending = [key for key in pending if key not in over]
        now = clock()
        for key, count in ask(pending).items():
            watch.saw(key, count, now)
        hung.update(watch.stalled(pending, now))
        pending = [key for key in pending if key not in hung]
        if pending and say is not None and now - said >= SAY_EVERY_S:
            said = now
            say(pending, now - start, max(watch.quiet_for(key, now) for key in pending))
    return over, hung


class AskActors:
    """`ask` for `wait_alive` over Ray actors: one `progress()` call in flight per key, its
    answer taken once it came, never waited for (a frozen engine just stays quiet)."""

    def __init__(self, actor_of: Callable[[Key], object]) -> None:
        self.actor_of = actor_of
        self.asked: dict[Key, object] = {}  # key -> its progress call in flight

    def __call__(self, keys: list[Key]) -> dict[Key, object]:
        import ray

        answered = {}
        if self.asked:
            refs = list(self.asked.values())
            came = {r.hex() for r in ray.wait(refs, num_returns=len(refs), timeout=0)[0]}
            for key, ref in list(self.asked.items()):
                if ref.hex() in came:
                    del self.asked[key]
                    with contextlib.suppress(ray.exceptions.RayError):  # lost: no progress
                        answered[key] = ray.get(ref)
        for key in keys:
            if key not in self.asked:
                self.asked[key] = self.actor_of(key).progress.remote()
        return {key: count for key, count in answered.items() if key in keys}
