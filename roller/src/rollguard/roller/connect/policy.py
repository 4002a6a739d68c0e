"""Auto-restart's policy (Strimzi proposal 055), pure and table-tested: when a failed connector
is restarted, when the watcher gives up, when its count is reset; and the per-connector settings
file. `rollguard.roller.connect.autorestart` does the I/O around it.

- A connector is restarted when it or any of its tasks is FAILED, and the whole minutes since
  its last restart are at least `backoff_minutes(count)` = min(count * count + count, 60):
  0, 2, 6, 12, 20, 30, 42, 56, 60, 60 ... after the 0th, 1st, 2nd ... restart.
- With `maxRestarts` set, the watcher gives up after that many restarts and says so once;
  unset means no limit.
- Once a connector has run without failure for longer than the current backoff interval, its
  count is reset (and a give-up lifted).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rollguard.shared.errors import ConfigError


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


class RestartAction(enum.Enum):
    HEALTHY = "healthy"
    RESTART = "restart"
    WAIT = "wait"  # failed, inside the backoff
    GIVE_UP = "give-up"  # failed, maxRestarts reached: said once
    GAVE_UP = "gave-up"  # failed, already given up: quiet
    RESET = "reset"


def next_action(
    failed: bool, tracker: Tracker, now: float, settings: ConnectorSettings
) -> RestartAction:
    """The policy, pure: what to do with a connector in this state. Updates nothing."""
    if not failed:
        if tracker.count == 0 and not tracker.gave_up:
            return RestartAction.HEALTHY
        since = tracker.healthy_since if tracker.healthy_since is not None else now
        if now - since > backoff_minutes(tracker.count) * 60:
            return RestartAction.RESET
        return RestartAction.HEALTHY
    limit = settings.max_restarts
    if limit is not None and tracker.count >= limit:
        return RestartAction.GAVE_UP if tracker.gave_up else RestartAction.GIVE_UP
    if tracker.last_restart is None:
        return RestartAction.RESTART
    whole_minutes = int((now - tracker.last_restart) // 60)
    return (
        RestartAction.RESTART
        if whole_minutes >= backoff_minutes(tracker.count)
        else RestartAction.WAIT
    )


def apply(action: RestartAction, tracker: Tracker, failed: bool, now: float) -> Tracker:
    """The tracker after `action` was carried out."""
    if action is RestartAction.RESET:
        return Tracker()
    if action is RestartAction.RESTART:
        return Tracker(tracker.count + 1, now, None, False)
    if action is RestartAction.GIVE_UP:
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
