"""What the roll's canary saw over a stretch of time, as figures (pure, table-tested).

`rollguard roll --canary TOPIC` sends to and reads from a topic with a partition led by each
broker for the whole roll (`rollguard.roller.roll.canary.client`). Each send is kept as when it was
sent and how long its acknowledgement took (or that it failed), each record read back as when
it arrived and how long after it was sent: a `CanarySample` and a `CanaryArrival`
(`rollguard.roller.model`). Here those become the figures of one window (`figures`): the idle
baseline before the first restart, then each restart, from the node's restart to its being
back. A send belongs to the window it was *sent* in, whenever its answer comes (a send that
fails does so up to the delivery timeout later: `settled` says when a window's answers are all
in); a record read back, and the consumer's gaps, to the window they happen in.

Percentiles are nearest-rank (the smallest value with at least q of the values at or below it):
a value that was measured, never an interpolation between two sends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rollguard.roller.model import CanaryArrival, CanarySample
from rollguard.shared.converters import format_duration


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q` percentile (0 < q <= 1) of `values`; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def longest_gap(arrivals: Sequence[float], start: float, end: float) -> float:
    """The longest time within [start, end] with nothing read back: between two arrivals, from
    the start to the first, from the last to the end (`arrivals` sorted)."""
    longest, last = 0.0, start
    for at in arrivals:
        if at < start:
            continue
        if at > end:
            break
        longest, last = max(longest, at - last), at
    return max(longest, end - last)


@dataclass(frozen=True, slots=True)
class Figures:
    """One window's figures; latencies in milliseconds, None when nothing was measured (no send
    acknowledged, nothing read back)."""

    seconds: float  # the window's length
    sent: int  # sends answered (acknowledged or failed) that were sent in the window
    failed: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    e2e_p50_ms: float | None
    e2e_p99_ms: float | None
    e2e_max_ms: float | None
    longest_gap_s: float  # the consumer's longest time without a record, within the window

    @property
    def producing(self) -> bool:
        """At least one send acknowledged: a canary that cannot produce is never healthy."""
        return self.p50_ms is not None

    def fields(self, prefix: str = "") -> dict[str, float | int | None]:
        """The figures as an event carries them (camelCase; `prefix` for a baseline's)."""

        def name(key: str) -> str:
            return prefix + key[0].upper() + key[1:] if prefix else key

        ms = {
            "p50Ms": self.p50_ms,
            "p99Ms": self.p99_ms,
            "maxMs": self.max_ms,
            "e2eP50Ms": self.e2e_p50_ms,
            "e2eP99Ms": self.e2e_p99_ms,
            "e2eMaxMs": self.e2e_max_ms,
        }
        rounded = {k: None if v is None else round(v, 1) for k, v in ms.items()}
        counts = {"sent": self.sent, "failed": self.failed}
        said = {**counts, **rounded, "longestGapS": round(self.longest_gap_s, 2)}
        if not prefix:
            said = {"seconds": round(self.seconds, 2), **said}
        return {name(k): v for k, v in said.items()}

    def text(self) -> str:
        """One line: sends, failures, send latency, end to end, the consumer's longest gap."""
        if not self.producing:
            sends = f"no send acknowledged of {self.sent}"
        else:
            sends = (
                f"send p50 {_ms(self.p50_ms)} p99 {_ms(self.p99_ms)} max {_ms(self.max_ms)}, "
                f"{self.failed} failed of {self.sent}"
            )
        e2e = "" if self.e2e_p99_ms is None else f", end to end p99 {_ms(self.e2e_p99_ms)}"
        return f"{sends}{e2e}, longest consumer gap {_seconds(self.longest_gap_s)}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}ms" if value >= 10 else f"{value:.1f}ms"


def _seconds(value: float) -> str:
    return f"{value:.1f}s" if value < 10 else format_duration(round(value))


def figures(
    samples: Sequence[CanarySample], arrivals: Sequence[CanaryArrival], start: float, end: float
) -> Figures:
    """The figures of [start, end]: the sends sent in it (answered), the records read back in it,
    the consumer's longest gap in it. `arrivals` sorted by `at`."""
    sends = [s for s in samples if start <= s.at <= end]
    latencies = [s.latency * 1000 for s in sends if s.latency is not None]
    read = [a for a in arrivals if start <= a.at <= end]
    e2e = [a.latency * 1000 for a in read]
    return Figures(
        seconds=end - start,
        sent=len(sends),
        failed=sum(1 for s in sends if s.latency is None),
        p50_ms=percentile(latencies, 0.5),
        p99_ms=percentile(latencies, 0.99),
        max_ms=max(latencies, default=None),
        e2e_p50_ms=percentile(e2e, 0.5),
        e2e_p99_ms=percentile(e2e, 0.99),
        e2e_max_ms=max(e2e, default=None),
        longest_gap_s=longest_gap([a.at for a in arrivals], start, end),
    )


BRIEF = ("sent", "failed", "p50Ms", "p99Ms", "maxMs", "longestGapS")  # a broker's, in an event


def by_broker(
    samples: Sequence[CanarySample],
    arrivals: Sequence[CanaryArrival],
    start: float,
    end: float,
    leaders: Mapping[int, int],
) -> dict[int, Figures]:
    """The figures of [start, end] for each broker, over the partitions it is the preferred
    leader of (`leaders`: partition -> broker): what the clients of each broker's partitions
    saw. A send made before the producer knew the partitions belongs to none."""
    found = {}
    for broker in sorted(set(leaders.values())):
        mine = {p for p, b in leaders.items() if b == broker}
        found[broker] = figures(
            [s for s in samples if s.partition in mine],
            [a for a in arrivals if a.partition in mine],
            start,
            end,
        )
    return found


def brief(found: Mapping[int, Figures]) -> dict[str, dict[str, float | int | None]]:
    """Each broker's figures as an event carries them: by broker id, the `BRIEF` fields."""
    return {
        str(broker): {k: v for k, v in seen.fields().items() if k in BRIEF}
        for broker, seen in found.items()
    }


def settled(unanswered: Sequence[float], end: float, now: float, timeout: float) -> bool:
    """Whether a window that ended at `end` has every answer it will get: none of the sends
    still unanswered (their times) was sent in it, or the delivery timeout (`timeout`) has
    passed since its end, after which the producer has failed any that were."""
    return now >= end + timeout or not any(at <= end for at in unanswered)


def stalled(last_ack: float | None, now: float, within: float, since: float) -> bool:
    """Nothing acknowledged for `within` seconds up to `now` (`last_ack`: the latest
    acknowledgement, None for none yet; counted from `since`, the canary's start, at the
    earliest): a canary that cannot produce."""
    return now - max(since, last_ack if last_ack is not None else since) >= within


@dataclass(frozen=True, slots=True)
class Breach:
    """Why the canary's gate is closed now: a sentence, and the figures behind it."""

    reason: str
    failed: int = 0
    p99_ms: float | None = None


def breach(
    samples: Sequence[CanarySample],
    unanswered: Sequence[float],
    start: float,
    now: float,
    *,
    max_p99_ms: float | None,
) -> Breach | None:
    """The canary's gate over [start, now] (the last `--canary-window`): None when within its
    budget. Closed when a send sent in it failed, when none sent in it was acknowledged (a
    canary that cannot produce is never healthy), or, with `max_p99_ms`, when the sends' p99
    is above it. A send still unanswered counts for as long as it has waited so far once that
    is past the bound (a stalled send is no faster for not being answered yet); a younger one
    is not known yet and does not count."""
    sends = [s for s in samples if start <= s.at <= now]
    failed = sum(1 for s in sends if s.latency is None)
    span = _seconds(now - start)
    if failed:
        return Breach(f"{failed} of {len(sends)} sends failed in the last {span}", failed=failed)
    latencies = [s.latency * 1000 for s in sends if s.latency is not None]
    if not latencies:
        return Breach(f"no send acknowledged in the last {span}")
    if max_p99_ms is None:
        return None
    waiting = [(now - at) * 1000 for at in unanswered if start <= at <= now]
    latencies += [ms for ms in waiting if ms > max_p99_ms]
    p99 = percentile(latencies, 0.99)
    if p99 is None or p99 <= max_p99_ms:
        return None
    return Breach(
        f"send p99 {_ms(p99)} over the last {span} (more than {_ms(max_p99_ms)})", p99_ms=p99
    )
