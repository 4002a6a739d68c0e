"""Connector offsets (KIP-875; Strimzi proposal 083 for MirrorMaker 2): list them into a folder
or a ConfigMap, edit them there, alter them from it, or reset them.

A MirrorMaker 2 connector's offsets live under the key `<name>.json` with `->` written `--`
(ConfigMap keys cannot hold `>`): `east->west.MirrorSourceConnector` is
`east--west.MirrorSourceConnector.json`. Any other connector's key is `offsets.json`. The value
is Connect's `GET /connectors/{c}/offsets` body, pretty-printed, which is also the body that
`PATCH` takes, so list, edit, alter is a round trip.

Alter and reset need the connector STOPPED (Connect refuses otherwise); `--stop` stops it first
and waits. Everything that can be checked is checked before anything changes: the key exists,
its JSON parses, the connector exists and is (or has become) STOPPED.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Protocol

from rollguard.roller.configmap import MissingKey
from rollguard.roller.connect.client import ConnectClient
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.files import atomic_write

GENERIC_KEY = "offsets.json"


class OffsetsError(RollguardError):
    """An offsets operation refused or failed; the message names the connector and the cause."""


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
        except OSError as exc:
            raise ConfigError(f"cannot read {target}: {exc.strerror}") from None

    def write(self, key: str, text: str) -> str:
        target = self.path / key
        try:
            atomic_write(target, text.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write {target}: {exc.strerror}") from None
        return str(target)


def parse_offsets(text: str, where: str) -> Any:
    """The JSON of an offsets key; ConfigError with line and column when it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None


async def list_offsets(client: ConnectClient, connector: str, store: KeyStore, key: str) -> str:
    body = await client.offsets(connector)
    return store.write(key, json.dumps(body, indent=2) + "\n")


async def ensure_stopped(
    client: ConnectClient, connector: str, *, stop: bool, timeout: float, poll: float = 0.5
) -> None:
    status = await client.status(connector)
    if status.state == "STOPPED":
        return
    if not stop:
        raise OffsetsError(
            f"connector {connector} is {status.state}, not STOPPED: Connect changes offsets only "
            "of a stopped connector; stop it first (--stop does that, or PUT "
            f"/connectors/{connector}/stop). Nothing was changed"
        )
    await client.stop(connector)
    deadline = time.monotonic() + timeout
    while True:
        status = await client.status(connector)
        if status.state == "STOPPED":
            return
        if time.monotonic() >= deadline:
            raise OffsetsError(
                f"connector {connector} was asked to stop but is {status.state} after "
                f"{timeout:g}s; offsets were not changed"
            )
        await asyncio.sleep(poll)


async def alter_offsets(
    client: ConnectClient,
    connector: str,
    store: KeyStore,
    key: str,
    *,
    stop: bool,
    timeout: float,
) -> str:
    body = parse_offsets(store.read(key), f"{store.where} key {key}")
    await ensure_stopped(client, connector, stop=stop, timeout=timeout)
    return await client.alter_offsets(connector, body)


async def reset_offsets(
    client: ConnectClient, connector: str, *, stop: bool, timeout: float
) -> str:
    await ensure_stopped(client, connector, stop=stop, timeout=timeout)
    return await client.reset_offsets(connector)
