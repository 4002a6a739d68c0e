"""Connector auto-restart (Strimzi proposal 055, outside the operator): a watcher of one Kafka
Connect cluster that restarts failed connectors and tasks with a growing backoff.

- A connector is restarted when it or any of its tasks is FAILED, and the whole minutes since
  its last restart are at least `backoff_minutes(count)` = min(count * count + count, 60):
  0, 2, 6, 12, 20, 30, 42, 56, 60, 60 ... after the 0th, 1st, 2nd ... restart.
- With `maxRestarts` set, the watcher gives up after that many restarts and says so once;
  unset means no limit.
- Once a connector has run without failure for longer than the current backoff interval, its
  count is reset (and a give-up lifted).
- Counts and times are saved (a file written atomically, or a ConfigMap) after every change, so
  a restarted watcher carries on where the last one stopped.
- Workers older than KIP-745 (Kafka 3.0) ignore `includeTasks`/`onlyFailed`: there the failed
  connector and each failed task are restarted one by one.
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from prometheus_client import CollectorRegistry, Counter

from rollguard.roller.connect import ConnectClient, ConnectError, ConnectorStatus, parse_version
from rollguard.shared.errors import ConfigError
from rollguard.shared.files import atomic_write

logger = logging.getLogger("rollguard.auto-restart")

KIP_745 = (3, 0)  # the first Kafka version whose restart endpoint takes includeTasks/onlyFailed
STATE_VERSION = 1


def backoff_minutes(count: int) -> int:
    """Minutes to wait after the `count`-th restart before the next one."""
    return min(count * count + count, 60)


@dataclass
class Tracker:
    """What the watcher remembers of one connector (epoch seconds)."""

    count: int = 0
    last_restart: float | None = None
    healthy_since: float | None = None
    gave_up: bool = False


@dataclass(frozen=True, slots=True)
class ConnectorSettings:
    enabled: bool = True
    max_restarts: int | None = None


class Action(enum.Enum):
    HEALTHY = "healthy"
    RESTART = "restart"
    WAIT = "wait"  # failed, inside the backoff
    GIVE_UP = "give-up"  # failed, maxRestarts reached: said once
    GAVE_UP = "gave-up"  # failed, already given up: quiet
    RESET = "reset"


def decide(failed: bool, tracker: Tracker, now: float, settings: ConnectorSettings) -> Action:
    """The policy, pure: what to do with a connector in this state. Updates nothing."""
    if not failed:
        if tracker.count == 0 and not tracker.gave_up:
            return Action.HEALTHY
        since = tracker.healthy_since if tracker.healthy_since is not None else now
        if now - since > backoff_minutes(tracker.count) * 60:
            return Action.RESET
        return Action.HEALTHY
    limit = settings.max_restarts
    if limit is not None and tracker.count >= limit:
        return Action.GAVE_UP if tracker.gave_up else Action.GIVE_UP
    if tracker.last_restart is None:
        return Action.RESTART
    whole_minutes = int((now - tracker.last_restart) // 60)
    return Action.RESTART if whole_minutes >= backoff_minutes(tracker.count) else Action.WAIT


def apply(action: Action, tracker: Tracker, failed: bool, now: float) -> Tracker:
    """The tracker after `action` was carried out."""
    if action is Action.RESET:
        return Tracker()
    if action is Action.RESTART:
        return Tracker(tracker.count + 1, now, None, False)
    if action is Action.GIVE_UP:
        return Tracker(tracker.count, tracker.last_restart, None, True)
    if failed:
        return Tracker(tracker.count, tracker.last_restart, None, tracker.gave_up)
    if tracker.count == 0 and not tracker.gave_up:
        return tracker  # nothing to remember
    since = tracker.healthy_since if tracker.healthy_since is not None else now
    return Tracker(tracker.count, tracker.last_restart, since, tracker.gave_up)


# ---- settings per connector ---------------------------------------------------------------


@dataclass(frozen=True)
class Overrides:
    default: ConnectorSettings
    connectors: Mapping[str, ConnectorSettings]

    def __call__(self, name: str) -> ConnectorSettings:
        return self.connectors.get(name, self.default)


def _settings(entry: Any, base: ConnectorSettings, where: str) -> ConnectorSettings:
    if not isinstance(entry, dict) or set(entry) - {"enabled", "maxRestarts"}:
        raise ConfigError(f"{where}: expected a mapping with enabled and/or maxRestarts")
    enabled = entry.get("enabled", base.enabled)
    limit = entry.get("maxRestarts", base.max_restarts)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}: enabled must be true or false, got {enabled!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(
            f"{where}: maxRestarts must be a whole number >= 0 or null, got {limit!r}"
        )
    return ConnectorSettings(enabled, limit)


def load_overrides(path: Path | None, max_restarts: int | None) -> Overrides:
    """The config file: `{defaults: {maxRestarts: N}, connectors: {NAME: {maxRestarts: N,
    enabled: false}}}`; --max-restarts is the default when the file sets none."""
    base = ConnectorSettings(True, max_restarts)
    if path is None:
        return Overrides(base, {})
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"auto-restart config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"auto-restart config {path}: not valid YAML ({exc})") from None
    if not isinstance(document, dict) or set(document) - {"defaults", "connectors"}:
        raise ConfigError(f"auto-restart config {path}: expected keys defaults and connectors")
    default = _settings(document.get("defaults", {}), base, f"{path}: defaults")
    connectors = document.get("connectors", {}) or {}
    if not isinstance(connectors, dict):
        raise ConfigError(f"auto-restart config {path}: connectors must be a mapping")
    return Overrides(
        default,
        {
            str(name): _settings(entry, default, f"{path}: connectors.{name}")
            for name, entry in connectors.items()
        },
    )


# ---- state --------------------------------------------------------------------------------


class StateStore(Protocol):
    def load(self) -> dict[str, Tracker]: ...

    def save(self, trackers: dict[str, Tracker]) -> None: ...


def encode_state(trackers: dict[str, Tracker]) -> str:
    body = {
        "version": STATE_VERSION,
        "connectors": {name: asdict(t) for name, t in sorted(trackers.items())},
    }
    return json.dumps(body, indent=1)


def decode_state(text: str, where: str) -> dict[str, Tracker]:
    try:
        body = json.loads(text)
        version = body["version"]
        trackers = {str(k): Tracker(**v) for k, v in body["connectors"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        problem = f"unreadable ({exc!r})"
    else:
        if version == STATE_VERSION:
            return trackers
        problem = f"version {version!r}, this watcher writes {STATE_VERSION}"
    raise ConfigError(f"auto-restart state {where}: {problem}; move it away to start afresh")


class FileStateStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Tracker]:
        if not self.path.exists():
            return {}
        return decode_state(self.path.read_text(), str(self.path))

    def save(self, trackers: dict[str, Tracker]) -> None:
        atomic_write(self.path, encode_state(trackers).encode())


# ---- the watcher --------------------------------------------------------------------------


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.restarts = Counter(
            "rollguard_connector_restarts",
            "Restarts of failed connectors and tasks by the auto-restart watcher",
            ["connector"],
            registry=self.registry,
        )
        self.give_ups = Counter(
            "rollguard_connector_give_ups",
            "Connectors the watcher gave up on (maxRestarts reached)",
            ["connector"],
            registry=self.registry,
        )
        self.errors = Counter(
            "rollguard_connect_errors",
            "Passes in which a connector's status could not be read or it could not be restarted",
            ["connector"],
            registry=self.registry,
        )


@dataclass(frozen=True, slots=True)
class Event:
    connector: str
    action: Action
    detail: str


class AutoRestarter:
    def __init__(
        self,
        client: ConnectClient,
        store: StateStore,
        settings: Callable[[str], ConnectorSettings],
        *,
        connectors: list[str] | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.store = store
        self.settings = settings
        self.only = connectors
        self.metrics = metrics or Metrics()
        self._clock = clock
        self.trackers = store.load()

    async def check(self) -> list[Event]:
        """One pass over the connectors: restart, wait, give up or reset each as due."""
        names = self.only if self.only is not None else await self.client.connectors()
        kip_745 = parse_version(await self.client.version()) >= KIP_745
        events: list[Event] = []
        changed = False
        for name in names:
            settings = self.settings(name)
            if not settings.enabled:
                continue
            try:
                status = await self.client.status(name)
            except ConnectError as exc:
                if exc.status == 404 and name in self.trackers:
                    del self.trackers[name]  # deleted: forget it
                    changed = True
                self.metrics.errors.labels(name).inc()
                logger.warning("%s", exc)
                continue
            tracker = self.trackers.get(name, Tracker())
            now = self._clock()
            action = decide(status.failed, tracker, now, settings)
            detail = ""
            if action is Action.RESTART:
                try:
                    detail = await self._restart(status, kip_745, tracker.count + 1)
                except ConnectError as exc:
                    self.metrics.errors.labels(name).inc()
                    logger.warning("%s", exc)
                    continue
                self.metrics.restarts.labels(name).inc()
            elif action is Action.GIVE_UP:
                detail = (
                    f"giving up on connector {name}: still failed after {tracker.count} "
                    f"restarts (maxRestarts {settings.max_restarts}); restart it by hand"
                )
                logger.error("%s", detail)
                self.metrics.give_ups.labels(name).inc()
            elif action is Action.RESET:
                detail = (
                    f"connector {name} has run without failure for more than "
                    f"{backoff_minutes(tracker.count)} min: restart count reset "
                    f"(was {tracker.count})"
                )
                logger.warning("%s", detail)
            elif action is Action.WAIT:
                assert tracker.last_restart is not None
                due = tracker.last_restart + backoff_minutes(tracker.count) * 60
                detail = f"{status.describe()}; next restart in {max(0.0, due - now):.0f}s"
                logger.info("%s", detail)
            updated = apply(action, tracker, status.failed, now)
            if updated != tracker:
                if updated == Tracker():
                    self.trackers.pop(name, None)
                else:
                    self.trackers[name] = updated
                changed = True
            if action is not Action.HEALTHY and action is not Action.GAVE_UP:
                events.append(Event(name, action, detail))
        if changed:
            self.store.save(self.trackers)
        return events

    async def _restart(self, status: ConnectorStatus, kip_745: bool, count: int) -> str:
        name = status.name
        what = f"connector {status.state}" + (
            f", tasks {status.failed_tasks} FAILED" if status.failed_tasks else ""
        )
        if kip_745:
            outcome = await self.client.restart(name, include_tasks=True, only_failed=True)
            how = "one KIP-745 restart"
            after = f"; now {outcome.states.describe()}" if outcome.states else ""
        else:
            # Before KIP-745 the parameters are ignored: restart the failed parts one by one.
            if status.state == "FAILED":
                await self.client.restart(name)
            for task in status.failed_tasks:
                await self.client.restart_task(name, task)
            how, after = "connector and tasks one by one (worker older than KIP-745)", ""
        detail = (
            f"restarted connector {name} ({what}) by {how}: restart {count}, next backoff "
            f"{backoff_minutes(count)} min{after}"
        )
        logger.warning("%s", detail)
        return detail
