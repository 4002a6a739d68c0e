"""The one place the tests, the benchmarks and the demos build `rollguard roll` and `rollguard
plan` command lines (and the other commands that take an inventory), as operators type them.

    rollguard roll --inventory FILE --bootstrap HOST:PORT --cert ... --key ... --cacert ...
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


def rollguard_args(
    command: str,
    *,
    inventory: Path | str | None = None,
    bootstrap: str | None = None,
    tls: Pki | Sequence[str] = (),
    state_dir: Path | str | None = None,
    timings: Sequence[str] = (),
    roll_id: str | None = None,
    extra: Sequence[str] = (),
    rollguard: Path | str = BIN / "rollguard",
) -> list[str]:
    """`rollguard COMMAND` with the inventory, the bootstrap, the client certificate (a `Pki`'s
    roller pair, or the flags as given), the state dir, `timings`, the roll id and `extra`, each
    only when given."""
    args = [str(rollguard), command]
    if inventory is not None:
        args += ["--inventory", str(inventory)]
    if bootstrap is not None:
        args += ["--bootstrap", bootstrap]
    args += tls.client_flags() if isinstance(tls, Pki) else list(tls)
    if state_dir is not None:
        args += ["--state-dir", str(state_dir)]
    args += timings
    if roll_id is not None:
        args += ["--roll-id", roll_id]
    args += extra
    return args
