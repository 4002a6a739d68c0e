"""The one place the tests, the benchmarks and the demos build `rollguard roll` and `rollguard
plan` command lines, as operators type them, on VMs (an inventory) or on Kubernetes (a
namespace, a selector, the agents' URL template):

    rollguard roll --inventory FILE | --namespace NS --selector S
        --bootstrap HOST:PORT [--agent-url TEMPLATE] --cert ... --key ... --cacert ...
        --state-dir DIR [timings] --roll-id ID [anything else]

Every part but the command is optional: a test that checks what happens without a bootstrap
leaves it out. The order is always the one above (the demos print the line they run).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rollguard.peers.processes import BIN, Pki

# What the tests on the simulated cluster of real processes roll with: polls twice a second, a
# stuck call given up after 4 s, retries backing off from 0.5 s to 2 s; a roll of three nodes
# then takes seconds, not the minutes the roll's defaults (which the real tiers keep) give.
QUICK_TIMINGS = (
    "--poll-interval",
    "0.5",
    "--operation-timeout",
    "4s",
    "--retry-initial-backoff-ms",
    "500",
    "--retry-max-backoff-ms",
    "2000",
)
# What the roller's decision tests on Kubernetes roll with (pods on the real control plane or the
# API peer, their agents an in-process HTTPS peer): polls five times a second, two retries.
POD_TIMINGS = (
    "--poll-interval",
    "0.2",
    "--operation-timeout",
    "1.5s",
    "--retry-initial-backoff-ms",
    "100",
    "--retry-max-retries",
    "2",
)


def rollguard_args(
    command: str,
    *,
    inventory: Path | str | None = None,
    namespace: str | None = None,
    selector: str | None = None,
    bootstrap: str | None = None,
    agent_url: str | None = None,
    tls: Pki | Sequence[str] = (),
    state_dir: Path | str | None = None,
    timings: Sequence[str] = (),
    roll_id: str | None = None,
    extra: Sequence[str] = (),
    rollguard: Path | str = BIN / "rollguard",
) -> list[str]:
    """`rollguard COMMAND` with the inventory (or the namespace and selector), the bootstrap, the
    agents' URL template, the client certificate (a `Pki`'s roller pair, or the flags as
    given), the state dir, `timings`, the roll id and `extra`, each only when given."""
    args = [str(rollguard), command]
    if inventory is not None:
        args += ["--inventory", str(inventory)]
    if namespace is not None:
        args += ["--namespace", namespace]
    if selector is not None:
        args += ["--selector", selector]
    if bootstrap is not None:
        args += ["--bootstrap", bootstrap]
    if agent_url:
        args += ["--agent-url", agent_url]
    args += tls.client_flags() if isinstance(tls, Pki) else list(tls)
    if state_dir is not None:
        args += ["--state-dir", str(state_dir)]
    args += timings
    if roll_id is not None:
        args += ["--roll-id", roll_id]
    args += extra
    return args
