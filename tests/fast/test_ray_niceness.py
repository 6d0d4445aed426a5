"""The priority alignflow gives the Ray workers it starts (flows/ray/niceness.py): the
driver's (0 below it), or the user's own RAY_worker_niceness, checked once."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.ray import niceness


@pytest.mark.parametrize(("raw", "expected"), [(None, 0), ("", 0), ("7", 7), (" 19 ", 19)])
def test_the_drivers_priority_unless_the_user_set_one(monkeypatch, raw, expected):
    monkeypatch.delenv(niceness.ENV, raising=False)
    if raw is not None:
        monkeypatch.setenv(niceness.ENV, raw)
    assert niceness.worker_niceness() == expected


@pytest.mark.parametrize("raw", ["-1", "20", "high"])
def test_a_value_ray_cannot_use_is_named(monkeypatch, raw):
    monkeypatch.setenv(niceness.ENV, raw)
    with pytest.raises(ConfigError, match=f"RAY_worker_niceness='{raw}'.*0.*19"):
        niceness.worker_niceness()
