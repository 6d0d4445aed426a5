"""Joining through Ray Client (`flows/ray/connect.py`): a server that could not start this
client's session (its per-client process failed or timed out on a busy head, as in CI) is
asked again, each retry said in one line with the server's own reason; a server that keeps
failing ends in the usual one line, with that reason. `ray.init` is a stand-in here (the
failure cannot be provoked on demand); the real path is tests/infra/test_manifests_run.py."""

from __future__ import annotations

import socket

import pytest
import ray

from alignflow.errors import FlowError
from alignflow.flows.ray import connect

REASON = ("Initialization failure from server:\nTraceback (most recent call last):\n"
          "  File \"proxier.py\", line 766\nRuntimeError: Starting Ray client server failed.")


@pytest.fixture
def listening():
    """`ray://127.0.0.1:PORT` with something listening there (the probe's TCP connect)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"ray://127.0.0.1:{server.getsockname()[1]}"


def _init_failing(times: int, calls: list):
    def init(**kwargs):
        calls.append(kwargs["address"])
        if len(calls) <= times:
            raise ConnectionAbortedError(REASON)
    return init


def test_a_client_session_the_server_could_not_start_is_asked_again(listening, monkeypatch,
                                                                     capsys):
    calls: list = []
    monkeypatch.setattr(ray, "init", _init_failing(2, calls))
    monkeypatch.setattr(connect, "CLIENT_INIT_PAUSE_S", 0.0)
    connect._join_cluster(listening)
    connect._JOINED.discard(listening)
    assert calls == [listening] * 3
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == (f"alignflow: the Ray Client server at {listening} could not start this "
                        "client's session (RuntimeError: Starting Ray client server failed.); "
                        "trying again (1 of 2)")
    assert len(lines) == 2


def test_a_server_that_keeps_failing_ends_in_one_line_with_its_reason(listening, monkeypatch):
    monkeypatch.setattr(ray, "init", _init_failing(9, []))
    monkeypatch.setattr(connect, "CLIENT_INIT_PAUSE_S", 0.0)
    with pytest.raises(FlowError) as info:
        connect._join_cluster(listening)
    assert str(info.value).startswith(
        f"cannot connect to the Ray cluster at {listening!r}: RuntimeError: Starting Ray "
        "client server failed.; expected a running cluster")
