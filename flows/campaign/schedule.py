"""When rounds are due: `every: 6h` from an anchor, or a cron expression in a time zone.

A round's due time is its identity: round r+1 is due at the first schedule time after
round r's due time, whatever time round r ended, so wake times never drift. A driver that
was down over several due times runs only the latest one (`catchup: false`, the default)
or each in turn (`catchup: true`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from alignflow.errors import ConfigError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_MAX_STEPS = 100_000


def parse_duration(text: str) -> float:
    """'6h' → 21600.0; '1h30m', '90s', '2d', '0.5h' too; ConfigError otherwise."""
    clean = text.replace(" ", "").lower()
    parts = _DURATION.findall(clean)
    if not parts or "".join(n + u for n, u in parts) != clean:
        raise ConfigError(f"schedule.every={text!r}: expected a duration like 30m, 6h, 1d "
                          "or 1h30m")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise ConfigError(f"schedule.every={text!r}: expected a duration > 0")
    return seconds


def parse_time(text: str) -> float:
    """An ISO 8601 time ('2026-01-01T03:00:00Z'; no zone = UTC) → epoch seconds."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"schedule.start={text!r}: expected an ISO 8601 time like "
                          "2026-01-01T03:00:00Z") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


@dataclass(frozen=True, kw_only=True)
class ScheduleConfig:
    """every: interval between rounds (30m, 6h, 1d); or cron: a 5-field cron expression
    timezone: the cron expression's time zone (IANA name)
    start: the first due time (ISO 8601; default: when the campaign starts)
    catchup: after downtime, run every missed due time (true) or only the latest (false)
    """

    every: str | None = None
    cron: str | None = None
    timezone: str = "UTC"
    start: str | None = None
    catchup: bool = False

    def __post_init__(self) -> None:
        if (self.every is None) == (self.cron is None):
            raise ConfigError("schedule: give exactly one of schedule.every (e.g. 6h) and "
                              "schedule.cron (e.g. '0 3 * * *')")
        if self.every is not None:
            parse_duration(self.every)
        if self.start is not None:
            parse_time(self.start)
        if self.cron is not None:
            self._cron_after(0.0)

    @property
    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"schedule.timezone={self.timezone!r}: expected an IANA time "
                              "zone name such as UTC or Europe/Paris") from None

    def _cron_after(self, t: float) -> float:
        from cronsim import CronSim, CronSimError

        try:
            return next(CronSim(self.cron, datetime.fromtimestamp(t, self.zone))).timestamp()
        except CronSimError as exc:
            raise ConfigError(f"schedule.cron={self.cron!r}: {exc}") from None

    def first(self, created: float) -> float:
        """Round 0's due time: `start`, else the campaign's creation (cron: the first fire
        time at or after it)."""
        anchor = parse_time(self.start) if self.start else created
        return anchor if self.every else self._cron_after(anchor - 1e-6)

    def after(self, due: float) -> float:
        """The first schedule time strictly after `due`."""
        if self.every:
            return due + parse_duration(self.every)
        return self._cron_after(due)

    def next_due(self, previous: float, now: float) -> tuple[float, int]:
        """(the next round's due time, how many due times were skipped to reach it)."""
        nxt = self.after(previous)
        if self.catchup or nxt > now:
            return nxt, 0
        if self.every:
            k = math.floor((now - nxt) / parse_duration(self.every))
            return nxt + k * parse_duration(self.every), k
        skipped = 0
        while (later := self.after(nxt)) <= now and skipped < _MAX_STEPS:
            nxt, skipped = later, skipped + 1
        return nxt, skipped
