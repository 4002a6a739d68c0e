"""The cluster's DNS for a Python process run by the tests (the roller): names under `.svc`
resolve from the hosts file named by ROLLGUARD_TEST_HOSTS, which
`rollguard.peers.realkube_bridge.PodBridge` keeps as a headless service's records (one line
`<address> <pod>.<service>.<namespace>.svc` per pod with an address). A `.svc` name it does not
list does not resolve (EAI_NONAME, as a cluster DNS answers NXDOMAIN); every other name goes to
the system's resolver. Loaded only when the tests put this folder on PYTHONPATH.
"""

from __future__ import annotations

import os
import socket
from typing import Any

_HOSTS = os.environ.get("ROLLGUARD_TEST_HOSTS")
_system_getaddrinfo = socket.getaddrinfo


def _cluster_address(host: str) -> str | None:
    assert _HOSTS is not None
    try:
        with open(_HOSTS, encoding="utf-8") as hosts:
            for line in hosts:
                parts = line.split()
                if len(parts) == 2 and parts[1] == host:
                    return parts[0]
    except FileNotFoundError:
        pass
    return None


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if isinstance(name, str):
        bare = name.rstrip(".").removesuffix(".cluster.local").lower()
        if bare.endswith(".svc"):
            address = _cluster_address(bare)
            if address is None:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return _system_getaddrinfo(address, port, *args, **kwargs)
    return _system_getaddrinfo(host, port, *args, **kwargs)


if _HOSTS:
    socket.getaddrinfo = _getaddrinfo
