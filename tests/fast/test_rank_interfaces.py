"""A rank names the interface of its node's address for gloo and NCCL (issue 41 §8): on a
host whose name resolves to 127.0.1.1, gloo would otherwise listen there and the first
cross-node collective hang. The user's own GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME win."""

from __future__ import annotations

import types

import psutil
import pytest

from alignflow.tasks.distributed import interfaces


@pytest.fixture
def two_interfaces(monkeypatch):
    def addrs():
        return {"lo": [types.SimpleNamespace(address="127.0.0.1")],
                "eth7": [types.SimpleNamespace(address="fe80::1"),
                         types.SimpleNamespace(address="10.1.2.3")]}
    monkeypatch.setattr(psutil, "net_if_addrs", addrs)
    for name in interfaces.NAMES:
        monkeypatch.delenv(name, raising=False)


def test_the_interface_holding_the_nodes_address_is_named(two_interfaces):
    assert interfaces.interface_env("10.1.2.3") == {"GLOO_SOCKET_IFNAME": "eth7",
                                                    "NCCL_SOCKET_IFNAME": "eth7"}


def test_the_users_setting_wins(two_interfaces, monkeypatch):
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "ib0")
    assert interfaces.interface_env("10.1.2.3") == {"GLOO_SOCKET_IFNAME": "eth7"}


@pytest.mark.parametrize("address", [None, "127.0.0.1", "10.9.9.9"])
def test_loopback_unknown_or_no_address_names_nothing(two_interfaces, address):
    assert interfaces.interface_env(address) == {}


def test_join_sets_them_for_its_group_and_leave_restores(two_interfaces, monkeypatch):
    """A real one-rank group joined as a Ray rank on 10.1.2.3 would be; the names are part
    of the rank's environment for its life in the group, and gone after."""
    import os

    from alignflow.tasks.distributed import group

    monkeypatch.setattr(interfaces, "node_address", lambda: "10.1.2.3")
    monkeypatch.setattr(interfaces, "interface_env",
                        lambda a: {"GLOO_SOCKET_IFNAME": "lo"} if a == "10.1.2.3" else {})
    spec = group.GroupSpec(rank=0, world_size=1, master_addr="127.0.0.1",
                           master_port=group.free_port(), backend="gloo")
    group.join(spec)
    try:
        assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"
    finally:
        group.leave()
    assert "GLOO_SOCKET_IFNAME" not in os.environ
