"""The weight-sync group's gloo listens where the other nodes reach it (issue 41, item 8):
on the node address Ray reports, or on the interfaces `GLOO_SOCKET_IFNAME` names (the
user's choice wins), not on what the host name resolves to (127.0.1.1 on many
distributions: an engine on another node would wait on it until the sync times out).
A group of one rank is formed for real on loopback and carries a broadcast."""

from __future__ import annotations

import datetime

import pytest
import torch
import torch.distributed as dist

from alignflow.tasks.engines.vllm import broadcast


@pytest.fixture
def asked(monkeypatch) -> list[dict]:
    """What each gloo device was asked to listen on."""
    calls: list[dict] = []
    real = dist.ProcessGroupGloo.create_device

    def create_device(**where):
        calls.append(where)
        return real(**where)
    monkeypatch.setattr(dist.ProcessGroupGloo, "create_device", staticmethod(create_device))
    return calls


def _carries_a_broadcast() -> bool:
    store = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, wait_for_workers=False)
    group = broadcast._gloo(store, 0, 1, datetime.timedelta(seconds=30))
    tensor = torch.arange(4.0)
    group.broadcast([tensor], broadcast._root0(datetime.timedelta(seconds=30))).wait()
    return torch.equal(tensor, torch.arange(4.0))


def test_gloo_listens_on_the_node_address_ray_reports(asked, monkeypatch):
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setattr(broadcast, "node_address", lambda: "127.0.0.1")
    assert _carries_a_broadcast()
    assert asked == [{"hostname": "127.0.0.1"}]


def test_the_users_interfaces_win(asked, monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setattr(broadcast, "node_address", lambda: "10.1.2.3")
    assert _carries_a_broadcast()
    assert asked == [{"interface": "lo"}]
