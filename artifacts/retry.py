"""Ride out a store that goes away for a while: retry an unreachable endpoint with backoff.

A run on S3 outlives short outages of the endpoint (a restarted MinIO, a network blip):
every `Store` operation that fails with a *system* `StoreError` (the endpoint cannot be
reached) is tried again with exponential backoff (0.25 s doubling to 5 s) for up to
`$ALIGNFLOW_STORE_RETRY_SECONDS` (default 120 s) — but only once the store has answered in
this process (or in the driver that shipped it here): a wrong endpoint fails at once, it
is not an outage. Bad credentials, a missing bucket or a missing key are never retried.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from alignflow.errors import StoreError

T = TypeVar("T")
DEFAULT_SECONDS = 120.0
_LOG = logging.getLogger("alignflow.store")


def budget_seconds() -> float:
    return float(os.environ.get("ALIGNFLOW_STORE_RETRY_SECONDS", DEFAULT_SECONDS))


def call(store: Any, fn: Callable[[], T]) -> T:
    """`fn()`, retried while the store (which answered before) is unreachable."""
    deadline, delay = None, 0.25
    while True:
        try:
            out = fn()
            if deadline is not None:
                _LOG.warning("alignflow: store %s answers again", store.url)
            store.reached = True
            return out
        except StoreError as exc:
            if exc.kind != "system" or not store.reached:
                raise
            if deadline is None:
                deadline = time.monotonic() + budget_seconds()
                _LOG.warning("alignflow: store %s unreachable (%s); retrying for up to %.0f s",
                             store.url, exc, budget_seconds())
            if time.monotonic() + delay > deadline:
                err = StoreError(f"{exc} (still unreachable after {budget_seconds():.0f} s of "
                                 "retries; $ALIGNFLOW_STORE_RETRY_SECONDS)")
                raise err from exc
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
