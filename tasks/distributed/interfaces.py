"""Which network interface a rank's gloo and NCCL use across nodes.

gloo listens on the address the host name resolves to unless told an interface; on many
distributions that is 127.0.1.1, so ranks on two nodes never reach each other and the
first cross-node collective hangs. Under Ray the node's address is known (the one Ray
reports for this worker), so a rank names the interface that holds it — unless the user
set `GLOO_SOCKET_IFNAME` / `NCCL_SOCKET_IFNAME`, which always win.
"""

from __future__ import annotations

import os
import sys

NAMES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def node_address() -> str | None:
    """This node's address as Ray reports it (None outside a Ray worker or driver)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    return ray.util.get_node_ip_address()


def interface_of(address: str) -> str | None:
    """The name of the interface that holds `address` (None: no interface does)."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.address == address for a in addresses):
            return name
    return None


def interface_env(address: str | None) -> dict[str, str]:
    """`GLOO_SOCKET_IFNAME` / `NCCL_SOCKET_IFNAME` for the interface of `address`, for each
    the user left unset; nothing for a loopback address (one node: any interface works)."""
    if not address or address.startswith("127.") or address == "::1":
        return {}
    name = interface_of(address)
    if name is None:
        return {}
    return {key: name for key in NAMES if not os.environ.get(key)}
