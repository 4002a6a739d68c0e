"""Connector auto-restart (Strimzi proposal 055, outside the operator): a watcher of one Kafka
Connect cluster that restarts failed connectors and tasks with a growing backoff, as
`rollguard.roller.connect.policy` decides.

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

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter

from rollguard.roller.configmap import ConfigMapStore, MissingKey
from rollguard.roller.connect.client import ConnectClient, ConnectError, ConnectorStatus
from rollguard.roller.connect.policy import (
    ConnectorSettings,
    RestartAction,
    Tracker,
    apply,
    backoff_minutes,
    next_action,
)
from rollguard.roller.connect.versions import RESTART_PARAMS_SINCE, parse_version
from rollguard.shared.errors import ConfigError
from rollguard.shared.files import atomic_write

logger = logging.getLogger("rollguard.auto-restart")

KIP_745 = RESTART_PARAMS_SINCE  # the first version whose restart takes includeTasks/onlyFailed
STATE_VERSION = 1


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


class ConfigMapStateStore:
    """The counts in key `auto-restart.json` of a ConfigMap (its other keys are kept)."""

    KEY = "auto-restart.json"

    def __init__(self, client: Any, namespace: str, name: str) -> None:
        self.keys = ConfigMapStore(client, namespace, name)

    def load(self) -> dict[str, Tracker]:
        try:
            text = self.keys.read(self.KEY)
        except MissingKey:
            return {}
        return decode_state(text, f"{self.keys.where} key {self.KEY}")

    def save(self, trackers: dict[str, Tracker]) -> None:
        self.keys.write(self.KEY, encode_state(trackers))


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
    action: RestartAction
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
            action = next_action(status.failed, tracker, now, settings)
            detail = ""
            if action is RestartAction.RESTART:
                try:
                    detail = await self._restart(status, kip_745, tracker.count + 1)
                except ConnectError as exc:
                    self.metrics.errors.labels(name).inc()
                    logger.warning("%s", exc)
                    continue
                self.metrics.restarts.labels(name).inc()
            elif action is RestartAction.GIVE_UP:
                detail = (
                    f"giving up on connector {name}: still failed after {tracker.count} "
                    f"restarts (maxRestarts {settings.max_restarts}); restart it by hand"
                )
                logger.error("%s", detail)
                self.metrics.give_ups.labels(name).inc()
            elif action is RestartAction.RESET:
                detail = (
                    f"connector {name} has run without failure for more than "
                    f"{backoff_minutes(tracker.count)} min: restart count reset "
                    f"(was {tracker.count})"
                )
                logger.warning("%s", detail)
            elif action is RestartAction.WAIT:
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
            if action is not RestartAction.HEALTHY and action is not RestartAction.GAVE_UP:
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
