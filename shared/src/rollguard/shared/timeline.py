"""The recovery timeline's wire format: what the agent serves and the collector reads.

The agent keeps a durable journal of broker-state records (`rollguard.agent.timeline_store`)
and serves it with `GET /v1/recovery-timeline?after=SEQ&limit=N`; the roller's collector pulls
it page by page (`rollguard.roller.collect`). This module holds only what both sides need: a
record, a page, a gap of records a failing disk could not write, the endpoint's path and page
limit, and the segment files' names (tests and the demo seed journals in the agent's own format).

A record is one JSON object; on disk, one per line in segment files `timeline-<first seq, 20
digits>.jsonl`. `seq` is strictly increasing per node and continues across agent restarts.
Records that could not be written take no seq; they are reported as a gap, `unwritten` {fromTs,
toTs, records}: on every page while the writes fail, and, once a write succeeds again, in a
marker record written before it (its `brokerState` is null: what the broker did meanwhile is not
known), so the gap stays in the history. Readers that ignore the field see an unknown state for
that time.

`recoveryPhase` is the broker-state report's `recovery.phase` (`loading`: the log loading of a
clean start; `recovering`: a recovery after an unclean stop), or `none` when the agent had a
sample without a recovery object (the broker is not loading its logs); null only when the agent
had no sample (its `brokerState` is null too). It was added later: a record without it (an
older agent, which could not tell a loading from a recovery) reads as null, so null never means
"not loading" when a state is set; a phase this reader does not know reads as `recovering`, as
the broker-state report's reader does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from rollguard.shared.errors import WireFormatError
from rollguard.shared.wire import RecoveryPhase

PREFIX, SUFFIX = "timeline-", ".jsonl"
TIMELINE_PATH = "/v1/recovery-timeline"
MAX_LIMIT = 10000  # records in one page
# A record's recoveryPhase when the agent's sample had no recovery object.
NO_RECOVERY: Final = "none"
TimelinePhase = RecoveryPhase | Literal["none"]


def segment_name(first_seq: int) -> str:
    """The file name of the segment whose first record has `first_seq`."""
    return f"{PREFIX}{first_seq:020d}{SUFFIX}"


def segment_seq(name: str) -> int | None:
    """The first seq of the segment file `name`; None for a name that is not a segment's."""
    if not (name.startswith(PREFIX) and name.endswith(SUFFIX)):
        return None
    digits = name[len(PREFIX) : -len(SUFFIX)]
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True, slots=True)
class Gap:
    """Records the agent could not write (a full or failing disk): when, and how many."""

    from_ts: int  # UTC epoch milliseconds of the first record not written
    to_ts: int  # ... and of the last
    records: int

    def to_wire(self) -> dict[str, int]:
        return {"fromTs": self.from_ts, "toTs": self.to_ts, "records": self.records}

    @classmethod
    def from_wire(cls, data: object) -> Gap:
        if not isinstance(data, dict):
            raise WireFormatError(f"'unwritten' must be an object, got {data!r:.80}")
        try:
            return cls(int(data["fromTs"]), int(data["toTs"]), int(data["records"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise WireFormatError(f"malformed 'unwritten': {exc!r}") from exc

    def extended(self, ts: int) -> Gap:
        return Gap(self.from_ts, ts, self.records + 1)


@dataclass(frozen=True, slots=True)
class TimelineRecord:
    node_id: str
    boot_id: str
    seq: int
    ts: int  # UTC epoch milliseconds
    broker_state: int | None  # None: the agent had no usable sample (JMX down, broker gone)
    remaining_logs: int | None = None
    remaining_segments: int | None = None
    unwritten: Gap | None = None  # set on a gap marker: records lost to a failing disk
    # NO_RECOVERY: a sample without a recovery object; None: no sample, or an older agent
    recovery_phase: TimelinePhase | None = None

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "nodeId": self.node_id,
            "bootId": self.boot_id,
            "seq": self.seq,
            "ts": self.ts,
            "brokerState": self.broker_state,
            "remainingLogsToRecover": self.remaining_logs,
            "remainingSegmentsToRecover": self.remaining_segments,
            "recoveryPhase": None if self.recovery_phase is None else str(self.recovery_phase),
        }
        if self.unwritten is not None:
            body["unwritten"] = self.unwritten.to_wire()
        return body

    @classmethod
    def from_wire(cls, data: object) -> TimelineRecord:
        if not isinstance(data, dict):
            raise WireFormatError(f"timeline record must be an object, got {data!r:.80}")
        try:
            record = cls(
                str(data["nodeId"]),
                str(data["bootId"]),
                int(data["seq"]),
                int(data["ts"]),
                _optional_int(data.get("brokerState")),
                _optional_int(data.get("remainingLogsToRecover")),
                _optional_int(data.get("remainingSegmentsToRecover")),
                Gap.from_wire(data["unwritten"]) if data.get("unwritten") is not None else None,
                _optional_phase(data.get("recoveryPhase")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise WireFormatError(f"malformed timeline record: {exc}") from exc
        return record

    def same_state(self, other: TimelineRecord | None) -> bool:
        """Whether `other` says the same about the broker: a change of phase alone (a clean
        start's loading turning out to be a recovery) is a change."""
        return other is not None and self._state() == other._state()

    def _state(self) -> tuple[object, ...]:
        return (
            self.broker_state,
            self.remaining_logs,
            self.remaining_segments,
            self.recovery_phase,
        )


def _optional_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer")
    return value


def _optional_phase(value: object) -> TimelinePhase | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"recoveryPhase {value!r} is not a string")
    if value == NO_RECOVERY:
        return NO_RECOVERY
    # Unknown: the phase that claims more (a recovery), as the broker-state report's reader does.
    return RecoveryPhase.LOADING if value == RecoveryPhase.LOADING else RecoveryPhase.RECOVERING


@dataclass(frozen=True, slots=True)
class Page:
    records: list[TimelineRecord]
    next_cursor: int  # pass as `after` to get what follows
    earliest: int | None  # smallest seq still kept
    latest: int  # largest seq written (0: none yet)
    expired: tuple[int, int] | None  # seqs asked for that have expired (first, last)
    unwritten: Gap | None = None  # records failing to be written right now (a full disk)

    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "records": [r.to_wire() for r in self.records],
            "next": self.next_cursor,
            "earliest": self.earliest,
            "latest": self.latest,
        }
        if self.expired is not None:
            # Records the caller asked for no longer exist: say so, so a gap is reported.
            body["expired"] = {"fromSeq": self.expired[0], "toSeq": self.expired[1]}
        if self.unwritten is not None:
            # Records are being lost now: the gap is not in the history yet (see the module).
            body["unwritten"] = self.unwritten.to_wire()
        return body

    @classmethod
    def from_wire(cls, data: object) -> Page:
        if not isinstance(data, dict) or not isinstance(data.get("records"), list):
            raise WireFormatError(f"a timeline page must be an object with records: {data!r:.80}")
        try:
            expired = data.get("expired")
            unwritten = data.get("unwritten")
            return cls(
                [TimelineRecord.from_wire(r) for r in data["records"]],
                int(data["next"]),
                _optional_int(data.get("earliest")),
                int(data["latest"]),
                (int(expired["fromSeq"]), int(expired["toSeq"])) if expired else None,
                Gap.from_wire(unwritten) if unwritten is not None else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise WireFormatError(f"malformed timeline page: {exc!r}") from exc
