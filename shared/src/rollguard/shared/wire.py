"""The agent's wire contract: the JSON of `GET /v1/broker-state` (Strimzi proposal 048).

    {"brokerState": 3}
    {"brokerState": 1,
     "recovery": {"remainingLogsToRecover": 123, "remainingSegmentsToRecover": 456,
                  "phase": "recovering"}}

`recovery` appears while Kafka's log-loading gauges exist and the state is STARTING (1) or
RECOVERY (2): a real KRaft broker loads its logs in STARTING as often as in RECOVERY, depending
on whether its registration was acknowledged first (docs/architecture.md). Both counts are sums
over log dirs and recovery threads: `remainingLogsToRecover` is the logs not yet loaded, the
measure of progress; `remainingSegmentsToRecover` is the segments left in the logs the recovery
threads are on now (it rises when a thread moves to its next log), a detail. `phase` tells a
recovery after an unclean stop (`recovering`: segments are being replayed) from the log loading
of every clean start (`loading`); a reader that gets no phase (Strimzi's agent, older rollguard
agents) takes it as `recovering`. Additive fields may appear; readers ignore fields they do not
know. rollguard's agent adds:

- `sampledAt`: when the sample was taken (ISO 8601 UTC, the agent's clock);
- `brokerStartedAt`: when the broker's JVM started (JMX `java.lang:type=Runtime` `StartTime`,
  ISO 8601 UTC). It identifies one run of the broker process: the roller counts a restart only
  when this changes, so readiness never depends on comparing two machines' clocks;
- `agentBootId`: an id the agent draws at each start (also the timeline's `bootId`);
- `kafkaVersion` and `kafkaCommitId`: the Kafka the node runs (JMX `kafka.server:type=app-info,
  id=<node>` `Version` and `CommitId`), once its server has started: Kafka registers that MBean
  as the last step of its start, so a node still starting or recovering has none yet. A
  controller-only node's `503 broker-state-missing` answer carries them too.

Strimzi's Java agent names the recovery object `recoveryState`, so the reader accepts that key
too; it sends none of the additive fields, and the roller then falls back to the weaker checks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from rollguard.shared.errors import WireFormatError
from rollguard.shared.states import BrokerState

BROKER_STATE_PATH = "/v1/broker-state"
# The states in which Kafka loads its logs (KRaft: before or after its registration is acked).
LOADING_STATES = frozenset({BrokerState.STARTING, BrokerState.RECOVERY})


class RecoveryPhase(StrEnum):
    """Whether a broker loading its logs is replaying segments (after an unclean stop)."""

    LOADING = "loading"  # a clean start: the logs are opened, nothing is replayed
    RECOVERING = "recovering"  # after an unclean stop: segments are read and checked again


@dataclass(frozen=True, slots=True)
class RecoveryProgress:
    """What is left of a log recovery, summed over every log dir and recovery thread."""

    remaining_logs: int
    remaining_segments: int
    phase: RecoveryPhase = RecoveryPhase.RECOVERING

    def __post_init__(self) -> None:
        if self.remaining_logs < 0 or self.remaining_segments < 0:
            raise ValueError("remaining logs and segments cannot be negative")


# What a version or commit id can be: Kafka's own are short ASCII (`4.4.0`, `4.1.0-rc2`,
# `a0f9be8d5fe3bd18`); anything else is not taken as one.
_BUILD_TEXT = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")


@dataclass(frozen=True, slots=True)
class KafkaBuild:
    """The Kafka a node runs, as it reports itself (`AppInfoParser`: its jar's version file)."""

    version: str
    commit_id: str | None = None

    def to_wire(self) -> dict[str, str]:
        body = {"kafkaVersion": self.version}
        if self.commit_id is not None:
            body["kafkaCommitId"] = self.commit_id
        return body

    @classmethod
    def read(cls, version: object, commit_id: object = None) -> KafkaBuild | None:
        """From what JMX or a peer said; None when the version is missing or not one (an
        unknown build is left out, never guessed)."""
        if not isinstance(version, str) or not _BUILD_TEXT.fullmatch(version):
            return None
        commit = (
            commit_id if isinstance(commit_id, str) and _BUILD_TEXT.fullmatch(commit_id) else None
        )
        return cls(version, commit)

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> KafkaBuild | None:
        return cls.read(body.get("kafkaVersion"), body.get("kafkaCommitId"))


@dataclass(frozen=True, slots=True)
class BrokerStateReport:
    """One observation of a broker, as the agent reports it."""

    broker_state: BrokerState
    recovery: RecoveryProgress | None = None
    sampled_at: datetime | None = None
    broker_started_at: datetime | None = None  # the broker JVM's start: one run of the process
    agent_boot_id: str | None = None
    kafka: KafkaBuild | None = None  # the Kafka it runs, once its server has started

    def __post_init__(self) -> None:
        if self.recovery is not None and self.broker_state not in LOADING_STATES:
            raise ValueError("recovery progress is only reported in STARTING or RECOVERY")

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {"brokerState": int(self.broker_state)}
        if self.recovery is not None:
            body["recovery"] = {
                "remainingLogsToRecover": self.recovery.remaining_logs,
                "remainingSegmentsToRecover": self.recovery.remaining_segments,
                "phase": str(self.recovery.phase),
            }
        if self.sampled_at is not None:
            body["sampledAt"] = format_time(self.sampled_at)
        if self.broker_started_at is not None:
            body["brokerStartedAt"] = format_time(self.broker_started_at)
        if self.agent_boot_id is not None:
            body["agentBootId"] = self.agent_boot_id
        if self.kafka is not None:
            body.update(self.kafka.to_wire())
        return body

    def describe(self) -> str:
        """For people: `STARTING (1): 12 logs left to recover (340 segments in the logs being
        recovered)`, or `... logs left to load` for the log loading of a clean start."""
        text = f"{self.broker_state.name} ({int(self.broker_state)})"
        if self.recovery is not None:
            if self.recovery.phase is RecoveryPhase.LOADING:
                text += f": {self.recovery.remaining_logs} logs left to load"
            else:
                text += (
                    f": {self.recovery.remaining_logs} logs left to recover "
                    f"({self.recovery.remaining_segments} segments in the logs being recovered)"
                )
        return text

    def to_json(self) -> bytes:
        return json.dumps(self.to_wire(), separators=(",", ":")).encode()

    @classmethod
    def from_wire(cls, body: object) -> BrokerStateReport:
        """Read a report from rollguard's agent or Strimzi's; WireFormatError if malformed."""
        if not isinstance(body, Mapping):
            raise WireFormatError(f"broker state report must be a JSON object, got {body!r:.80}")
        if "brokerState" not in body:
            raise WireFormatError("broker state report has no 'brokerState'")
        try:
            state = BrokerState.parse(body["brokerState"])
        except ValueError as exc:
            raise WireFormatError(str(exc)) from exc
        recovery = None
        raw = body.get("recovery", body.get("recoveryState"))
        if raw is not None and state in LOADING_STATES:
            recovery = _read_recovery(raw)
        boot_id = body.get("agentBootId")
        return cls(
            state,
            recovery,
            _read_time(body, "sampledAt"),
            _read_time(body, "brokerStartedAt"),
            boot_id if isinstance(boot_id, str) and boot_id else None,
            KafkaBuild.from_wire(body),
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> BrokerStateReport:
        try:
            body = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise WireFormatError(f"broker state report is not JSON: {exc}") from exc
        return cls.from_wire(body)


def _read_time(body: Mapping[str, Any], key: str) -> datetime | None:
    if not isinstance(body.get(key), str):
        return None
    try:
        return parse_time(body[key])
    except ValueError as exc:
        raise WireFormatError(f"{key!r} is not an ISO 8601 time: {exc}") from exc


def _read_recovery(raw: object) -> RecoveryProgress:
    if not isinstance(raw, Mapping):
        raise WireFormatError(f"'recovery' must be a JSON object, got {raw!r:.80}")
    counts = []
    for key in ("remainingLogsToRecover", "remainingSegmentsToRecover"):
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise WireFormatError(f"'recovery.{key}' must be a non-negative integer, got {value!r}")
        counts.append(value)
    # An unknown phase is read as the one that forbids more: never restart it.
    loading = raw.get("phase") == RecoveryPhase.LOADING
    phase = RecoveryPhase.LOADING if loading else RecoveryPhase.RECOVERING
    return RecoveryProgress(counts[0], counts[1], phase)


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a Z, e.g. 2026-11-22T02:15:54.123Z."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment
