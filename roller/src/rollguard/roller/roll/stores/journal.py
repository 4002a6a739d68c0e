"""Durable progress of a roll: its journal.

The roll journal is a versioned JSON record, rewritten atomically (temporary file, fsync,
rename; or a ConfigMap replace with its resourceVersion) after every decision that matters: the
roll's state and each node's record (`node.record`) as the roll moves it. Before a node is
restarted its intent is recorded; a roller killed at any moment and resumed with `--resume
ROLL_ID` never restarts a node whose intent is on record: at most once. A journal of the
previous release (version 1: a status per node) is read as the records it stands for, and
resumes; one this release cannot read is refused, saying what to do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from rollguard.roller.configmap import MANAGED_BY, ConfigMapStore, MissingKey
from rollguard.roller.roll.node.record import How, NodeRecord, Phase, Waiting
from rollguard.roller.roll.rules.safety import Baseline
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.files import atomic_write
from rollguard.shared.wire import KafkaBuild

logger = logging.getLogger(__name__)

VERSION = 2  # 2: each node's whole record (`node.record`); 1: a status per node (read, migrated)


class JournalError(RollguardError):
    """The roll journal cannot be written: the roll must stop, it could not resume safely."""


class RollState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass
class RollRecord:
    roll_id: str
    started_at: str
    state: RollState = RollState.RUNNING
    reason: str = ""
    nodes: dict[str, NodeRecord] = field(default_factory=dict)  # each node's, as the roll moves it
    # The Kafka version the roll brings every node to (`--kafka-version`): a resumed roll
    # continues the same upgrade (`resumed_target`).
    kafka_version: str | None = None

    def next_batch(self) -> int:
        """The number of the next batch: one more than any on record (a resumed roll goes on)."""
        return 1 + max((r.batch or 0 for r in self.nodes.values()), default=0)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "rollId": self.roll_id,
            "startedAt": self.started_at,
            "state": self.state.value,
            "reason": self.reason,
            **({"kafkaVersion": self.kafka_version} if self.kafka_version is not None else {}),
            "nodes": {name: _node_json(r) for name, r in self.nodes.items()},
        }

    @classmethod
    def from_json(cls, data: object) -> RollRecord:
        """ConfigError naming what is wrong when the record is not of the expected shape, or of
        a version this release cannot read (a journal of the previous release, version 1, is
        read as its records would have been written now)."""
        if not isinstance(data, dict):
            raise ConfigError(f"roll journal is not a JSON object: {str(data)[:80]!r}")
        version = data.get("version")
        if version not in (1, VERSION):
            newer = isinstance(version, int) and not isinstance(version, bool) and version > VERSION
            what = "a newer rollguard's" if newer else "not one rollguard writes"
            raise ConfigError(
                f"roll journal version {version!r} is {what} (this one reads {VERSION} and 1): "
                "resume it with the rollguard that wrote it, or start a new roll"
            )
        try:
            return cls._read(data, _node_v1 if version == 1 else _node)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"roll journal is malformed: {type(exc).__name__} {exc}") from None

    @classmethod
    def _read(
        cls, data: dict[str, Any], node: Callable[[str, dict[str, Any]], NodeRecord]
    ) -> RollRecord:
        return cls(
            roll_id=data["rollId"],
            started_at=data["startedAt"],
            state=RollState(data["state"]),
            reason=data.get("reason", ""),
            nodes={name: node(name, r) for name, r in data.get("nodes", {}).items()},
            kafka_version=_version(data.get("kafkaVersion")),
        )


def _node_json(r: NodeRecord) -> dict[str, Any]:
    """A node's record as the journal keeps it: everything but the budgets of its wait, which
    live on the roll's clock (`node.record`)."""
    waiting = {"kind": r.waiting.kind, "reason": r.waiting.reason} if r.waiting else None
    found = {
        "phase": r.phase.value,
        "at": r.at,
        "why": r.why or None,
        "reason": r.reason,
        "how": r.how.value if r.how is not None else None,
        "instance": r.instance,
        "batch": r.batch,
        "outOfSyncBefore": sorted(r.base.out_of_sync) or None,
        "voterLaggingBefore": (not r.base.voter_caught_up) or None,
        "kafkaVersion": r.kafka_version,
        "versionUnknown": r.version_unknown or None,
        "liveOnly": r.live_only or None,
        "canary": dict(r.canary) if r.canary else None,
        "waiting": waiting,
    }
    return {k: v for k, v in found.items() if v is not None or k in ("instance",)}


def _node(name: str, r: dict[str, Any]) -> NodeRecord:
    waiting = r.get("waiting")
    return NodeRecord(
        name,
        Phase(r["phase"]),
        at=_text(r.get("at", "")),
        why=_text(r.get("why", "")),
        reason=_text(r.get("reason", "")),
        how=How(r["how"]) if r.get("how") is not None else None,
        instance=r.get("instance"),
        base=Baseline(
            frozenset(_names(r.get("outOfSyncBefore", []))),
            r.get("voterLaggingBefore", False) is not True,
        ),
        batch=_batch(r.get("batch")),
        kafka_version=_version(r.get("kafkaVersion")),
        version_unknown=r.get("versionUnknown", False) is True,
        live_only=r.get("liveOnly", False) is True,
        canary=_figures(r.get("canary")),
        waiting=Waiting(_text(waiting["kind"]), _text(waiting["reason"]), 0.0) if waiting else None,
    )


# A journal of the previous release (version 1): each node's status, read as the record it is.
V1_STATUSES = {
    "restarting": (Phase.RESTARTING, How.RESTART),  # its restart on record, not its outcome
    "restarted": (Phase.DONE, How.RESTART),
    "skipped": (Phase.LEFT_OUT, None),
    "held": (Phase.HELD, None),
    "failed": (Phase.FAILED, None),
    "configuring": (Phase.CONFIGURING, How.LIVE),
    "configured": (Phase.DONE, How.LIVE),
}


def _node_v1(name: str, r: dict[str, Any]) -> NodeRecord:
    phase, how = V1_STATUSES[r["status"]]
    reason = _text(r.get("reason", ""))
    left = phase in (Phase.LEFT_OUT, Phase.HELD)
    return NodeRecord(
        name,
        phase,
        at=_text(r["at"]),
        why=reason if left else "",
        reason="" if left else reason,
        how=how,
        instance=r.get("instance"),
        base=Baseline(
            frozenset(_names(r.get("outOfSyncBefore", []))),
            r.get("voterLaggingBefore", False) is not True,
        ),
        batch=_batch(r.get("batch")),
        canary=_figures(r.get("canary")),
    )


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{str(value)[:80]!r} is not a string")
    return value


def _version(value: object) -> str | None:
    if value is None:
        return None
    build = KafkaBuild.read(value)
    if build is None:
        raise ValueError(f"kafkaVersion {value!r} is not a Kafka version")
    return build.version


def resumed_target(record: RollRecord, given: str | None) -> str | None:
    """The target version of a resumed roll: the journal's, which `given` (--kafka-version)
    may repeat but not change; ConfigError (exit 2, nothing done) when it would."""
    if given == record.kafka_version or given is None:
        return record.kafka_version
    if record.kafka_version is None:
        was = "a roll without a target version"
    else:
        was = f"an upgrade to Kafka {record.kafka_version}"
    raise ConfigError(
        f"--resume {record.roll_id}: that roll is {was}; --kafka-version {given} would change "
        "it: resume it without --kafka-version, or start a new roll"
    )


def _batch(value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"batch {value!r} is not a positive whole number")
    return value


def _figures(value: object) -> dict[str, float | int | None] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(
        isinstance(v, int | float | None) and not isinstance(v, bool) for v in value.values()
    ):
        raise ValueError(f"a node's canary figures are not numbers by name: {str(value)[:80]!r}")
    return value


def _names(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"outOfSyncBefore {value!r} is not a list of partition names")
    return tuple(value)


class JournalStore(Protocol):
    def load(self, roll_id: str) -> RollRecord | None: ...

    def save(self, record: RollRecord) -> None: ...

    def where(self, roll_id: str) -> str:
        """Where the journal of `roll_id` is (or would be), for messages."""
        ...

    def rolls(self) -> list[str] | None:
        """The ids of the rolls on record here; None when they cannot be listed."""
        ...


ROLLS_SHOWN = 10  # roll ids a message lists, the last ones in name (and so time) order


def nothing_to_resume(store: JournalStore, roll_id: str) -> ConfigError:
    """The error of `--resume` without a journal (exit 2, nothing was done): where it was looked
    for, and the rolls that are on record there."""
    rolls = store.rolls()
    if rolls is None:
        there = ""
    elif not rolls:
        there = "; there is no roll on record there"
    else:
        shown = rolls[-ROLLS_SHOWN:]
        more = f"{len(rolls) - len(shown)} older and " if len(rolls) > len(shown) else ""
        there = f"; the rolls on record there: {more}{', '.join(shown)}"
    return ConfigError(f"--resume {roll_id}: no roll journal {store.where(roll_id)}{there}")


class FileJournalStore:
    """One file per roll: DIR/roll-ROLL_ID.json."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, roll_id: str) -> Path:
        return self.folder / f"roll-{roll_id}.json"

    def where(self, roll_id: str) -> str:
        return str(self.path(roll_id))

    def rolls(self) -> list[str] | None:
        try:
            found = [p.name for p in self.folder.glob("roll-*.json")]
        except OSError:
            return None
        return sorted(name[len("roll-") : -len(".json")] for name in found)

    def load(self, roll_id: str) -> RollRecord | None:
        try:
            data = json.loads(self.path(roll_id).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"roll journal {self.path(roll_id)}: cannot be read ({exc})") from exc
        return RollRecord.from_json(data)

    def save(self, record: RollRecord) -> None:
        text = json.dumps(record.to_json(), indent=2) + "\n"
        try:
            atomic_write(self.path(record.roll_id), text.encode())
        except OSError as exc:
            raise JournalError(
                f"roll journal {self.path(record.roll_id)} cannot be written: {exc.strerror}"
            ) from exc


class ConfigMapJournalStore:
    """The roll journal on Kubernetes: key `journal.json` of ConfigMap `rollguard-roll-<id>`."""

    KEY = "journal.json"

    def __init__(self, client: Any, namespace: str) -> None:
        from rollguard.roller.kubernetes import AllowedCalls

        self.client = client  # a synchronous lightkube Client
        self.namespace = namespace
        self.allowed = AllowedCalls()  # a 403 after a restart of the API server: see there

    @staticmethod
    def name(roll_id: str) -> str:
        return f"rollguard-roll-{roll_id}"

    def _store(self, roll_id: str) -> ConfigMapStore:
        return ConfigMapStore(self.client, self.namespace, self.name(roll_id), self.allowed)

    def where(self, roll_id: str) -> str:
        return f"in {self._store(roll_id).where}"

    def rolls(self) -> list[str] | None:
        """Listed when the roller's Role allows it (`list` on configmaps); else None."""
        from lightkube.resources.core_v1 import ConfigMap

        from rollguard.roller.kubernetes import API_ERRORS

        prefix = self.name("")
        try:
            found = self.client.list(ConfigMap, namespace=self.namespace, labels=MANAGED_BY)
            names = [cm.metadata.name for cm in found if cm.metadata is not None]
        except API_ERRORS:
            return None
        return sorted(n[len(prefix) :] for n in names if n and n.startswith(prefix))

    def load(self, roll_id: str) -> RollRecord | None:
        try:
            text = self._store(roll_id).read(self.KEY)
        except MissingKey:
            return None
        try:
            return RollRecord.from_json(json.loads(text))
        except (KeyError, ValueError) as exc:
            raise ConfigError(
                f"roll journal in configmap {self.name(roll_id)} cannot be read ({exc})"
            ) from None

    def save(self, record: RollRecord) -> None:
        self._store(record.roll_id).write(self.KEY, json.dumps(record.to_json(), indent=2))
