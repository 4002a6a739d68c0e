"""From the MBeans Kafka registers to one broker-state report.

Kafka registers the recovery gauges once per log dir (remainingLogsToRecover) and once per log
dir and recovery thread (remainingSegmentsToRecover) while it loads its logs, and removes them
when loading ends. What a real Kafka 4.x shows (docs/architecture.md, "A real broker"):
- the gauges exist during the log loading of every start, clean or not, and the broker is in
  STARTING (1) or RECOVERY (2) then, depending on whether its registration was acknowledged
  before loading began: both count;
- remainingLogsToRecover counts the logs of a dir not yet loaded: the measure of progress;
- remainingSegmentsToRecover is, per thread, the segments left in the log that thread is on
  now (it rises when the thread moves on), and null until the thread has recovered something:
  after a clean stop nothing is recovered and every thread's value stays null, which is how a
  recovery (`phase: recovering`) is told from the loading of a clean start (`loading`).
The report sums over every dir and thread; Strimzi's agent keeps only the last gauge registered
and under-reports with JBOD or several recovery threads. This module is pure: it gets values,
it returns a report or says exactly what is wrong.

The same round reads the JVM's start time (`java.lang:type=Runtime` `StartTime`, epoch
milliseconds): it identifies one run of the broker process, so a roller can tell a restarted
broker from one that never went away without comparing two machines' clocks. And whether the
Kafka server has finished starting: `KafkaRaftServer.startup` registers
`kafka.server:type=app-info,id=<node>` as its last step, just before it logs "Kafka Server
started". A controller-only node has no BrokerState, so that is the only sign that its start
(the metadata log replayed, its listeners serving) is over: without BrokerState the answer is
`broker-state-missing` once it is registered, `server-starting` before. The same MBean gives the
Kafka the node runs (`Version`, `CommitId`): reported with the state, and in a controller-only
node's `broker-state-missing` answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import NamedTuple

from rollguard.shared.states import BrokerState
from rollguard.shared.wire import (
    LOADING_STATES,
    BrokerStateReport,
    KafkaBuild,
    RecoveryPhase,
    RecoveryProgress,
)

BROKER_STATE = "kafka.server:type=KafkaServer,name=BrokerState"
REMAINING_LOGS = "kafka.log:type=LogManager,name=remainingLogsToRecover"
REMAINING_SEGMENTS = "kafka.log:type=LogManager,name=remainingSegmentsToRecover"
RUNTIME = "java.lang:type=Runtime"
APP_INFO = "kafka.server:type=app-info"  # ,id=<node id>: registered when the server has started
ATTRIBUTE = "Value"
START_TIME = "StartTime"
APP_START_TIME = "StartTimeMs"
APP_VERSION = "Version"
APP_COMMIT = "CommitId"


class Query(NamedTuple):
    """An ObjectName (or pattern) and the attribute to read from each MBean it matches."""

    pattern: str
    attribute: str


# One JMX round reads all of these; the wildcards pick up every dir and thread.
QUERIES = (
    Query(BROKER_STATE, ATTRIBUTE),
    Query(REMAINING_LOGS + ",*", ATTRIBUTE),
    Query(REMAINING_SEGMENTS + ",*", ATTRIBUTE),
    Query(RUNTIME, START_TIME),
    # `id=*`: the server's own MBean, not the `kafka.server:type=app-info` of its metrics
    Query(APP_INFO + ",id=*", APP_START_TIME),
    Query(APP_INFO + ",id=*", APP_VERSION),
    Query(APP_INFO + ",id=*", APP_COMMIT),
)
# Epoch milliseconds a JVM's start time can hold: after 2000-01-01, before 3000-01-01.
_START_TIME_RANGE = (946_684_800_000, 32_503_680_000_000)


class FailureReason(StrEnum):
    """Why there is no usable sample; the `error` field of a 503 and a metrics label."""

    NO_SAMPLE_YET = "no-sample-yet"
    JMX_UNREACHABLE = "jmx-unreachable"
    JMX_TIMEOUT = "jmx-timeout"
    JMX_AUTH_FAILED = "jmx-auth-failed"
    JMX_ERROR = "jmx-error"
    BROKER_STATE_MISSING = "broker-state-missing"  # started, without BrokerState: a controller
    SERVER_STARTING = "server-starting"  # neither BrokerState nor the server's start registered
    MALFORMED_VALUE = "malformed-value"
    STALE_SAMPLE = "stale-sample"


class SampleError(Exception):
    """A sample could not be taken or read; `reason` says which way it failed, and `details`
    what is known all the same (a controller-only node's Kafka version), for the 503 body."""

    def __init__(
        self, reason: FailureReason, message: str, details: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.details = details or {}


@dataclass(frozen=True, slots=True)
class MBeanValue:
    object_name: str
    attribute: str
    value: object


def object_name_key(object_name: str) -> tuple[str, str, str]:
    """(domain, type, name) of an ObjectName such as `kafka.log:type=LogManager,name=x,dir=/d`.

    Other key properties (dir, threadNum) are what distinguishes the gauges being summed.
    Quoted values (`dir="/a,b"`) are honoured so that a comma inside them does not split.
    """
    domain, _, keys = object_name.partition(":")
    properties: dict[str, str] = {}
    key, value, quoted, in_value = "", "", False, False
    for char in keys + ",":
        if in_value:
            if char == '"' and (not value or quoted):
                quoted = not quoted
                value += char
            elif char == "," and not quoted:
                properties[key] = value.strip('"')
                key, value, in_value = "", "", False
            else:
                value += char
        elif char == "=":
            in_value = True
        else:
            key += char
    return domain, properties.get("type", ""), properties.get("name", "")


_BROKER_STATE_KEY = object_name_key(BROKER_STATE)
_LOGS_KEY = object_name_key(REMAINING_LOGS)
_SEGMENTS_KEY = object_name_key(REMAINING_SEGMENTS)
_RUNTIME_KEY = object_name_key(RUNTIME)
_APP_INFO_KEY = object_name_key(APP_INFO)


def _count(reading: MBeanValue) -> int | None:
    """A gauge's count; None for a gauge Kafka has registered but not set yet (a null Value)."""
    value = reading.value
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SampleError(
            FailureReason.MALFORMED_VALUE,
            f"{reading.object_name} {reading.attribute} is {reading.value!r}, "
            "not a non-negative integer",
        )
    return value


def _start_time(reading: MBeanValue) -> datetime:
    value = reading.value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 20:
        value = int(value)
    low, high = _START_TIME_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise SampleError(
            FailureReason.MALFORMED_VALUE,
            f"{RUNTIME} {START_TIME} is {reading.value!r:.60}, not a time in epoch milliseconds",
        )
    return datetime.fromtimestamp(value / 1000, UTC)


def interpret(
    readings: Iterable[MBeanValue], sampled_at: datetime, *, boot_id: str | None = None
) -> BrokerStateReport:
    """Sum the recovery gauges and read the broker state from one JMX round.

    `recovery` is reported while Kafka has its gauges registered and the broker is STARTING or
    RECOVERY; without the gauges there is nothing loading (before loading starts, or after it
    ended), and a report of "0 left" would be a lie, so the key is left out, as Strimzi's agent
    does. `boot_id` is the agent's, reported beside the broker JVM's start time.
    """
    state: BrokerState | None = None
    logs: int | None = None  # None: no remainingLogsToRecover gauge is registered
    segments = 0
    replaying = False  # a thread has set its segment count: segments are being recovered
    started: datetime | None = None
    server_started = False  # the server's app-info MBean is registered
    app: dict[str, object] = {}  # its Version and CommitId
    for reading in readings:
        key = object_name_key(reading.object_name)
        if key == _RUNTIME_KEY and reading.attribute == START_TIME:
            started = _start_time(reading)
        if key == _APP_INFO_KEY and reading.attribute == APP_START_TIME:
            server_started = reading.value is not None
        if key == _APP_INFO_KEY and reading.attribute in (APP_VERSION, APP_COMMIT):
            app[reading.attribute] = reading.value
        if reading.attribute != ATTRIBUTE:
            continue
        if key == _BROKER_STATE_KEY:
            try:
                state = BrokerState.parse(reading.value)
            except ValueError as exc:
                raise SampleError(
                    FailureReason.MALFORMED_VALUE, f"{BROKER_STATE} Value: {exc}"
                ) from exc
        elif key == _LOGS_KEY:
            logs = (logs or 0) + (_count(reading) or 0)
        elif key == _SEGMENTS_KEY:
            count = _count(reading)
            if count is not None:
                segments += count
                replaying = True
    kafka = KafkaBuild.read(app.get(APP_VERSION), app.get(APP_COMMIT))
    if state is None and server_started:
        raise SampleError(
            FailureReason.BROKER_STATE_MISSING,
            f"{BROKER_STATE} is not registered and the server has started: a KRaft "
            "controller-only node",
            kafka.to_wire() if kafka is not None else None,
        )
    if state is None:
        raise SampleError(
            FailureReason.SERVER_STARTING,
            f"neither {BROKER_STATE} nor {APP_INFO} is registered: the Kafka server has not "
            "finished starting (or this is not a Kafka JVM)",
        )
    recovery = None
    if state in LOADING_STATES and logs is not None:
        phase = RecoveryPhase.RECOVERING if replaying else RecoveryPhase.LOADING
        recovery = RecoveryProgress(logs, segments, phase)
    return BrokerStateReport(state, recovery, sampled_at, started, boot_id, kafka)
