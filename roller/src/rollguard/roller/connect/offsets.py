"""Connector offsets (KIP-875; Strimzi proposal 083 for MirrorMaker 2): list them into a folder
or a ConfigMap, edit them there, alter them from it, or reset them; nothing half done.

A MirrorMaker 2 connector's offsets live under the key `<name>.json` with `->` written `--`
(ConfigMap keys cannot hold `>`): `east->west.MirrorSourceConnector` is
`east--west.MirrorSourceConnector.json`. Any other connector's key is `offsets.json`. The value
is Connect's `GET /connectors/{c}/offsets` body, pretty-printed, which is also the body that
`PATCH` takes, so list, edit, alter is a round trip.

A null offset means one thing everywhere: the partition has no offset. Connect lists a partition
it has just reset with offset null until it has read the reset back (a real 4.3 worker, for tens
of ms after a DELETE or a PATCH with null, longer on a loaded worker), then not at all; rollguard
writes Connect's body as it is (both say "no offset") and names those partitions in its output
(`Listing.reset`). In a file to alter, null resets that partition (KIP-875's tombstone, which
the MirrorMaker 2 connectors accept), so a listing fed back changes nothing; each partition an
alter resets is named in its output, and `--dry-run` marks it `-`.

The order of an alter or a reset, each step only if the one before succeeded:
1. the file is read and checked (`shapes`), with no request sent: a bad file is exit 2;
2. the worker's version (`GET /`): too old is exit 2 naming the version needed;
3. the connector's status: not STOPPED and no `--stop` is exit 1, nothing changed;
4. with `--stop`: PUT stop, then poll until STOPPED with no task listed (Connect's stop is
   asynchronous, and PATCH/DELETE are refused with 400 while task configs remain), within
   `--stop-timeout`;
5. PATCH or DELETE.
A failure after step 4 (or an interruption) puts the connector back as it was, RUNNING or
PAUSED, unless `--leave-stopped`; the message says which state it is in. `--dry-run` stops after
step 3 and prints what would change, from the current `GET offsets`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rollguard.roller.configmap import MissingKey
from rollguard.roller.connect.client import ConnectClient, ConnectError, ConnectorStatus
from rollguard.roller.connect.operations import is_stopped, wait_for, wait_resumed
from rollguard.roller.connect.versions import MODIFY_OFFSETS_SINCE, STOP_SINCE, require
from rollguard.shared.errors import ConfigError, NodeFailed, RollguardError
from rollguard.shared.files import atomic_write

GENERIC_KEY = "offsets.json"
RESTORE_ON_INTERRUPT = 1.5  # seconds to put a connector back when interrupted (grace is 2 s)

logger = logging.getLogger(__name__)


class OffsetsError(RollguardError):
    """An offsets operation refused or failed; the message names the connector, the cause and
    the state the connector is left in."""


def mm2_key(connector: str) -> str:
    return connector.replace("->", "--") + ".json"


def connector_of_key(key: str) -> str:
    """The MirrorMaker 2 connector a key belongs to (`--` back to `->`)."""
    if not key.endswith(".json"):
        raise ValueError(f"{key!r} is not an offsets key (NAME.json)")
    return key.removesuffix(".json").replace("--", "->")


class KeyStore(Protocol):
    where: str

    def read(self, key: str) -> str: ...

    def write(self, key: str, text: str) -> str: ...


class FolderStore:
    """A folder holding one file per key (or, to read, a single file whatever its name)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def read(self, key: str) -> str:
        target = self.path / key if self.path.is_dir() else self.path
        try:
            return target.read_text()
        except FileNotFoundError:
            raise MissingKey(f"no offsets file {target} (key {key})") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {target}: {getattr(exc, 'strerror', exc)}") from None

    def write(self, key: str, text: str) -> str:
        target = self.path / key
        try:
            atomic_write(target, text.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {target}: {exc.strerror}") from None
        return str(target)


def reset_partitions(entries: list[dict[str, Any]]) -> list[Any]:
    """The partitions whose offset is null: listed, partitions with no offset (just reset); in a
    file to alter, the partitions it resets."""
    return [e.get("partition") for e in entries if isinstance(e, dict) and e.get("offset") is None]


@dataclass(frozen=True, slots=True)
class Listing:
    """What `list_offsets` wrote: where, how many partitions have an offset, and the partitions
    Connect listed with offset null (no offset: reset, see the module docstring)."""

    written: str
    with_offset: int
    reset: list[Any]


async def list_offsets(client: ConnectClient, connector: str, store: KeyStore, key: str) -> Listing:
    require(await client.version(), STOP_SINCE, "reading offsets (GET .../offsets)")
    body = await client.offsets(connector)
    entries = body["offsets"]
    reset = reset_partitions(entries)
    # Connect's body as it is: a null there is also null in a PATCH, so fed back it changes nothing.
    written = store.write(key, json.dumps(body, indent=2) + "\n")
    return Listing(written, len(entries) - len(reset), reset)


# ---- the dry run ----------------------------------------------------------------------------


def partition_key(partition: Any) -> str:
    """A partition as one compact line (sorted keys), as the dry run and the output name it."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


def diff(current: list[dict[str, Any]], wanted: list[dict[str, Any]] | None) -> list[str]:
    """What writing `wanted` (None: a reset) would change in `current`, one line a partition:
    `~` changed, `+` new, `-` reset (its offset removed); then a count of what stays as it is.
    A partition `current` lists with offset null has no offset (just reset), as in `wanted`."""
    now = {
        partition_key(e.get("partition")): e["offset"]
        for e in current
        if e.get("offset") is not None
    }
    lines, same = [], 0
    if wanted is None:
        return [f"- {k}  {partition_key(v)} -> (none)" for k, v in sorted(now.items())] or [
            "(no offsets: nothing to reset)"
        ]
    for entry in wanted:
        key, offset = partition_key(entry["partition"]), entry["offset"]
        if key not in now:
            lines.append(
                f"+ {key}  (none) -> {partition_key(offset)}"
                if offset is not None
                else f"  {key}  (none) -> (none): no offset, nothing to reset"
            )
        elif offset is None:
            lines.append(f"- {key}  {partition_key(now[key])} -> (none)")
        elif now[key] == offset:
            same += 1
        else:
            lines.append(f"~ {key}  {partition_key(now[key])} -> {partition_key(offset)}")
    untouched = len(now) - sum(1 for e in wanted if partition_key(e["partition"]) in now)
    lines.append(f"{same} unchanged, {untouched} not in the file (kept as they are)")
    return lines


# ---- alter and reset ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """How to carry out an alter or a reset: the flags that shape steps 3 to 5."""

    stop: bool = False
    leave_stopped: bool = False
    resume: bool = False  # after success, too: put the connector back as it was
    dry_run: bool = False
    stop_timeout: float = 60.0


async def alter_offsets(
    client: ConnectClient,
    connector: str,
    entries: list[dict[str, Any]],
    change: Change,
    *,
    say: Callable[[str], None] = print,
) -> str:
    """PATCH the checked `entries` (see the module docstring for the order)."""
    what = "altering offsets (PATCH .../offsets)"
    return await _modify(
        client,
        connector,
        what,
        change,
        say,
        lambda: client.alter_offsets(connector, {"offsets": entries}),
        entries,
    )


async def reset_offsets(
    client: ConnectClient,
    connector: str,
    change: Change,
    *,
    say: Callable[[str], None] = print,
) -> str:
    what = "resetting offsets (DELETE .../offsets)"
    return await _modify(
        client, connector, what, change, say, lambda: client.reset_offsets(connector), None
    )


async def _modify(
    client: ConnectClient,
    connector: str,
    what: str,
    change: Change,
    say: Callable[[str], None],
    send: Callable[[], Awaitable[str]],
    entries: list[dict[str, Any]] | None,
) -> str:
    require(await client.version(), MODIFY_OFFSETS_SINCE, what)
    status = await client.status(connector)
    stopped = is_stopped(status)
    if not stopped and not change.stop and not change.dry_run:
        raise OffsetsError(
            f"connector {connector} is {status.state}, not STOPPED: Connect changes offsets only "
            "of a stopped connector; stop it first (--stop does that, or `rollguard connect "
            f"stop {connector}`). Nothing was changed"
        )
    if change.dry_run:
        current = (await client.offsets(connector))["offsets"]
        for line in diff(current, entries):
            say(line)
        how = (
            ""
            if stopped
            else ("; --stop would stop it first" if change.stop else "; it would need --stop")
        )
        return f"dry run: it is {status.state}{how}; nothing was sent"
    if stopped:
        return await send()  # not stopped by us: nothing to put back
    previous = "PAUSED" if status.state == "PAUSED" else "RUNNING"
    try:
        # Inside the try: an interrupt or a failure while the stop is in flight may come after
        # the worker took it, so the connector is put back either way (resuming or pausing it
        # again is harmless if the stop never landed).
        await client.stop(connector)
        await wait_for(
            client, connector, is_stopped, "STOPPED with no task", timeout=change.stop_timeout
        )
        message = await send()
    except asyncio.CancelledError:
        if not change.leave_stopped:
            await _restore_quickly(client, connector, previous)
        raise
    except RollguardError as exc:
        if change.leave_stopped:
            left = f"connector {connector} is left STOPPED (--leave-stopped)"
        else:
            left = await _restore(client, connector, previous, change.stop_timeout)
        text = f"{exc}; {left}"
        if isinstance(exc, ConnectError):
            raise ConnectError(text, exc.status, exc.connector) from None
        raise OffsetsError(text) from None
    if change.resume:
        return f"{message}; {await _restore(client, connector, previous, change.stop_timeout)}"
    return (
        f"{message}; connector {connector} is STOPPED (it was {status.state}): resume it with "
        f"`rollguard connect resume {connector}`"
    )


async def _restore(client: ConnectClient, connector: str, previous: str, wait: float) -> str:
    """Put a connector rollguard stopped back to `previous` (RUNNING or PAUSED), and wait up to
    `wait` seconds until the worker shows it so (a resumed connector shows RUNNING before its
    tasks are listed: `operations.wait_resumed`); what happened, in words."""
    verb = "paused" if previous == "PAUSED" else "resumed"
    try:
        if previous == "PAUSED":
            await client.pause(connector)
        else:
            await client.resume(connector)
    except ConnectError as exc:
        return (
            f"putting connector {connector} back to {previous} failed ({exc}): it is STOPPED; "
            f"resume it with `rollguard connect resume {connector}`"
        )
    try:
        if previous == "PAUSED":
            status = await wait_for(client, connector, _paused, "PAUSED", timeout=wait)
        else:
            status = await wait_resumed(client, connector, timeout=wait)
    except NodeFailed as exc:  # WaitTimeout, StateNotReached: it did not come back as it was
        return f"connector {connector} was {verb}, but {exc}"
    except ConnectError as exc:
        return f"connector {connector} was {verb}, but its state cannot be read now ({exc})"
    return f"connector {connector} was {verb} as it was before (now {status.states()})"


def _paused(status: ConnectorStatus) -> bool:
    return status.state == "PAUSED" and all(t.state == "PAUSED" for t in status.tasks)


async def _restore_quickly(client: ConnectClient, connector: str, previous: str) -> None:
    try:
        text = await asyncio.wait_for(
            _restore(client, connector, previous, RESTORE_ON_INTERRUPT - 0.5), RESTORE_ON_INTERRUPT
        )
    except TimeoutError:
        text = (
            f"connector {connector} may be left STOPPED (no answer while interrupted); resume "
            f"it with `rollguard connect resume {connector}`"
        )
    logger.warning("interrupted: %s", text)
