"""A Ray error can reach the driver before the watch's thread names the Ray process that
died (CI, 2026-12-03: `LocalRayletDiedError` ended the run FAILED, not RESUMABLE with its one
line). `watch.settle` waits for the watch's word, but only when the node is no longer whole."""

from __future__ import annotations

import threading

import ray

from alignflow.flows.ray import watch

WHOLE = {"gcs_server": 1, "raylet": 2, "ray::DashboardAgent": 3, "ray::RuntimeEnvAgent": 4}


def _armed(monkeypatch, alive: dict[str, int]) -> None:
    monkeypatch.setitem(watch._STATE, "armed", True)
    monkeypatch.setitem(watch._STATE, "lost", None)
    monkeypatch.setitem(watch._STATE, "session", "/no/session")
    monkeypatch.setattr(watch, "components", lambda session: alive)


def test_a_ray_error_on_a_broken_node_waits_for_the_watch(monkeypatch):
    _armed(monkeypatch, {"gcs_server": 1})  # the raylet and its agents are gone
    named = threading.Timer(0.1, lambda: watch._STATE.update(lost="raylet"))
    named.start()
    assert watch.settle(ray.exceptions.RaySystemError("the local raylet died")) == "raylet"
    named.join()


def test_a_worker_death_on_a_whole_node_is_not_the_node(monkeypatch):
    _armed(monkeypatch, WHOLE)
    assert watch.settle(ray.exceptions.RaySystemError("a worker died"), timeout=60) is None


def test_an_error_that_is_not_ray_s_is_not_the_node(monkeypatch):
    _armed(monkeypatch, {})
    assert watch.settle(ValueError("a user's bug"), timeout=60) is None
