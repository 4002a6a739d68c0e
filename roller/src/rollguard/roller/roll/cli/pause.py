"""Pausing a running roll: `rollguard roll pause|resume --roll-id ID`.

The pause lives on the roll's lease, which every roller already reads and writes: the lease
file's `paused` field for an inventory (`--state-dir`), the annotation `rollguard.io/paused` on
the Lease on Kubernetes (`--namespace`; `kubectl annotate lease rollguard-roll
rollguard.io/paused="by me"` pauses as well). It says who paused the roll and when. The roller
reads it before each restart (`PauseGate`; its renewals keep it) and starts none while it is
there: a node already restarting is still waited for, the roll keeps its lease, does not fail
(no --safety-wait budget runs) and says so in its output, events (`gate-closed`, gate `pause`)
and metrics. `resume` clears it and the roll goes on at its next poll. A roll interrupted while
paused and resumed with `roll --resume` stays paused until `roll resume`.

Only the roll holding the lease can be paused: another roll id, or a lease that is free or
expired, is exit 1 naming what holds it.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.roller.options import ENV_PREFIX, OutputOptions
from rollguard.roller.roll.cli.options import _roll_id
from rollguard.roller.roll.stores.lease import LeaseRecord, iso_seconds
from rollguard.shared.cli import ExitCode, Parser, report_failure
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.settings import Group, option

ACTIONS = ("pause", "resume")
HELP = (
    "pause a running roll between nodes; it keeps its lease and does not fail",
    "let a paused roll go on",
)
WHERE = Group("lease", "where the roll's lease is: --namespace on Kubernetes, else --state-dir")


@dataclass(frozen=True, kw_only=True)
class PauseOptions(OutputOptions):
    """`rollguard roll pause|resume`: which roll, and where its lease is."""

    sections = (WHERE,)

    roll_id: str = option(
        None, _roll_id, "the running roll to pause or resume", "ID", required=True, group=WHERE
    )
    namespace: str | None = option(
        None, str, "Kubernetes namespace of the roll's Lease", "NS", group=WHERE
    )
    state_dir: Path = option(
        ".rollguard",
        Path,
        "folder of the roll's lease file (an inventory's roll)",
        "DIR",
        group=WHERE,
    )


def parse(argv: Sequence[str]) -> argparse.Namespace | None:
    """`rollguard roll pause|resume ...`, parsed here: None for any other command line. Not
    sub-commands of `roll`'s parser: there, a mistyped flag's value would read as an unknown
    sub-command (`invalid choice: '60'`) instead of naming the flag."""
    if len(argv) < 2 or argv[0] != "roll" or argv[1] not in ACTIONS:
        return None
    action = argv[1]
    text = dict(zip(ACTIONS, HELP, strict=True))[action]
    parser = Parser(
        prog=f"rollguard roll {action}",
        usage=f"rollguard roll {action} --roll-id ID (--namespace NS | --state-dir DIR) [options]",
        description=f"{text[0].upper()}{text[1:]}. Example:\n  rollguard roll {action} "
        "--roll-id 20261126-2210-x7 --namespace kafka",
    )
    PauseOptions.add_flags(parser, ENV_PREFIX)
    parser.set_defaults(run=pause_command, command="roll", roll_action=action)
    return parser.parse_args(argv[2:])


def pause_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = PauseOptions.load(args, environ, ENV_PREFIX)
    action = args.roll_action
    note = f"by {who()} at {iso_seconds(time.time())}" if action == "pause" else ""
    try:
        record = asyncio.run(_set(options, note))
    except ConfigError:
        raise
    except RollguardError as exc:
        return report_failure(
            f"{action}: {exc}", ExitCode.FAILED, json_output=options.output == "json"
        )
    state = "paused" if record.paused else "running"
    if options.output == "json":
        print(json.dumps(_json(record, state)))
    else:
        said = f" ({record.paused})" if record.paused else ""
        print(f"roll {record.roll_id}: {state}{said}; held by {record.holder}")
    return ExitCode.OK


def _json(record: LeaseRecord, state: str) -> dict[str, Any]:
    return {
        "rollId": record.roll_id,
        "state": state,
        "paused": record.paused or None,
        "holder": record.holder,
    }


async def _set(options: PauseOptions, note: str) -> LeaseRecord:
    holder = f"{socket.gethostname()}:pause"
    if options.namespace is None:
        from rollguard.roller.roll.stores.lease_file import LEASE_FILE, FileLease

        path = options.state_dir / LEASE_FILE
        if not path.exists():
            raise RollguardError(
                f"roll {options.roll_id} is not running: no lease file {path} (--state-dir)"
            )
        return await FileLease(path, holder=holder, roll_id=options.roll_id).set_paused(note)
    from lightkube import AsyncClient
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    from rollguard.roller.roll.stores.lease_kubernetes import KUBERNETES_LEASE, KubernetesLease

    try:
        client = AsyncClient(namespace=options.namespace)
    except KubeConfigError as exc:
        raise ConfigError(f"Kubernetes: {exc}") from None
    try:
        lease = KubernetesLease(
            client, options.namespace, KUBERNETES_LEASE, holder=holder, roll_id=options.roll_id
        )
        return await lease.set_paused(note)
    finally:
        await client.close()


def who() -> str:
    """`user@host`, for the pause's note (no secret: what `last` shows)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
