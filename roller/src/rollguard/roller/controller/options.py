"""`rollguard controller`'s own options: which namespaces it watches, the Lease that elects
the replica that acts, where it keeps every roll's events; and the agents' client certificate,
read once at its start (a roll's options are each cluster's: `settings.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rollguard.roller.options import OUTPUT, AgentOptions, OutputOptions
from rollguard.shared.converters import HostPort, boolean, duration_between, listen_address
from rollguard.shared.errors import ConfigError
from rollguard.shared.settings import Group, option, repeated

__all__ = ["ControllerOptions"]

WATCH = Group("watching", "which namespaces' StatefulSets, and which replica acts")


def _namespace(text: str) -> str:
    name = text.strip()
    if not name or len(name) > 63 or not all(c.isalnum() or c == "-" for c in name):
        raise ValueError(f"{text!r}: a namespace is letters, digits and dashes, 63 at most")
    return name.lower()


@dataclass(frozen=True, kw_only=True)
class ControllerOptions(AgentOptions, OutputOptions):
    sections = (WATCH,)

    watch_namespace: tuple[str, ...] = option(
        "",
        repeated(_namespace),
        "watch the StatefulSets of this namespace (repeat it for several)",
        "NS",
        group=WATCH,
        repeat=True,
    )
    all_namespaces: bool = option(
        "false",
        boolean,
        "watch the StatefulSets of every namespace (a ClusterRole's rights; a switch)",
        switch=True,
        group=WATCH,
    )
    leader_namespace: str | None = option(
        None,
        _namespace,
        "namespace of the Lease that elects the one acting replica (default: the only "
        "--watch-namespace; the chart sets the controller's own)",
        "NS",
        group=WATCH,
    )
    leader_lease: str = option(
        "rollguard-controller",
        _namespace,
        "name of that Lease",
        "NAME",
        group=WATCH,
    )
    leader_lease_duration: float = option(
        "60s",
        duration_between("5s", "10m"),
        "how long a replica that stopped renewing the Lease (killed) keeps it from the other",
        "DURATION",
        group=WATCH,
    )
    metrics_listen: HostPort | None = option(
        None,
        listen_address,
        "serve the controller's Prometheus metrics (every running roll's, each cluster's "
        "phase, whether this replica leads) at http://HOST:PORT/metrics",
        "HOST:PORT",
        group=OUTPUT,
    )
    state_dir: Path = option(
        ".rollguard",
        Path,
        "folder of every roll's events (a volume that outlives the container)",
        "DIR",
        group=OUTPUT,
    )

    def check(self) -> None:
        super().check()
        if bool(self.watch_namespace) == self.all_namespaces:
            raise ConfigError("give --watch-namespace NS (repeatable) or --all-namespaces")
        if self.leader_namespace is None and len(self.watch_namespace) != 1:
            raise ConfigError(
                "--leader-namespace NS is needed with several namespaces or --all-namespaces "
                "(where the controller's Lease lives: its own namespace)"
            )

    @property
    def leader_at(self) -> str:
        return self.leader_namespace or self.watch_namespace[0]
