"""Each inventory node's configuration as it will be at its next start: its `config:` file, or
what its `config-command:` prints, read as Kafka reads a server.properties
(`rollguard.shared.javaprops`, checked against Java's `Properties.load`).

A configuration usually holds passwords, so a command's output is read from a pipe into memory
only: never written to the commands' log (as `restart:` output is), never logged, never put in a
message. Every failure is a ConfigError naming the node and the file or that it was its
config-command (the command line itself may carry what others should not read): an unreadable
file, a malformed line (its number), a command that could not start, failed, or ran too long.
The command runs with /bin/sh in a process group of its own, killed whole at its time limit, with
ROLLGUARD_NODE_ID and ROLLGUARD_NODE_NAME set as for the node's other commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence

from rollguard.roller.inventory import InventoryNode
from rollguard.shared.errors import ConfigError
from rollguard.shared.javaprops import PropertiesError, Property, parse_properties

__all__ = ["COMMAND_TIMEOUT", "has_desired", "read_all_desired", "read_desired"]

COMMAND_TIMEOUT = 60.0  # seconds for a config-command (an ssh to the host, say)
LAST_LINE_CHARS = 200


def has_desired(inventory: Sequence[InventoryNode]) -> bool:
    return any(n.config is not None or n.config_command is not None for n in inventory)


async def read_desired(
    entry: InventoryNode, *, timeout: float = COMMAND_TIMEOUT
) -> list[Property] | None:
    """The node's desired configuration (None: it has no `config`/`config-command`)."""
    name = entry.node.name
    if entry.config is not None:
        where = f"{name}: config {entry.config}"
        try:
            text = entry.config.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{where}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}: not UTF-8 text (byte {exc.start})") from None
        return _parsed(text, where, ":")
    if entry.config_command is not None:
        where = f"{name}: config-command"
        text = await _output(entry, where, timeout)
        return _parsed(text, f"{where} output", ", line ")
    return None


async def read_all_desired(
    inventory: Sequence[InventoryNode], *, timeout: float = COMMAND_TIMEOUT
) -> dict[str, list[Property]]:
    """Node name -> its desired configuration, for every node that has one (read one after the
    other: a config-command may be an ssh each)."""
    found = {}
    for entry in inventory:
        desired = await read_desired(entry, timeout=timeout)
        if desired is not None:
            found[entry.node.name] = desired
    return found


def _parsed(text: str, where: str, line_sep: str) -> list[Property]:
    try:
        return parse_properties(text)
    except PropertiesError as exc:
        raise ConfigError(f"{where}{line_sep}{exc.line}: {exc.problem}") from None


async def _output(entry: InventoryNode, where: str, timeout: float) -> str:
    assert entry.config_command is not None
    env: Mapping[str, str] = {
        **os.environ,
        "ROLLGUARD_NODE_ID": str(entry.node.node_id),
        "ROLLGUARD_NODE_NAME": entry.node.name,
    }
    try:
        # The inventory's command is a shell command line by design, written by the operator.
        process = await asyncio.create_subprocess_shell(
            entry.config_command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            start_new_session=True,  # its own process group: killed whole at the time limit
        )
    except OSError as exc:
        raise ConfigError(f"{where} could not be started: {exc.strerror or exc}") from None
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        raise ConfigError(f"{where} did not finish within {timeout:g}s; it was killed") from None
    if process.returncode != 0:
        code = process.returncode
        said = f"exited {code}" if code is not None and code >= 0 else f"killed ({code})"
        last = _last_line(err)
        raise ConfigError(f"{where} {said}" + (f": {last}" if last else " (nothing on stderr)"))
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} output: not UTF-8 text (byte {exc.start})") from None


def _last_line(data: bytes) -> str:
    """The command's last line on stderr (what it says when it fails; its stdout, the
    configuration, is never shown)."""
    for line in reversed(data.decode(errors="replace").splitlines()):
        if line.strip():
            return line.strip()[:LAST_LINE_CHARS]
    return ""
