"""Restart windows (`--window`, repeatable): no restart starts outside every window.

A window is `DAYS START-END ZONE`, e.g. `Mon-Fri 22:00-05:00 Europe/Berlin`:

- DAYS: English three-letter names (`Mon` .. `Sun`, any case), ranges (`Mon-Fri`; `Fri-Mon`
  wraps past Sunday), comma lists of either (`Mon,Wed-Fri`), or `*` for every day;
- START-END: `HH:MM` or `HH:MM:SS`; `24:00` only as END (the end of the day). An END before
  START passes midnight, and the window belongs to the day it starts on: `Fri 22:00-05:00`
  runs from Friday 22:00 to Saturday 05:00. START equal to END is refused (an empty window;
  a whole day is `00:00-24:00`);
- ZONE: a key of the IANA time zone database (`Europe/Berlin`, `America/New_York`, `UTC`).

A window opens at the first instant its zone's clock reads START (or later) and closes at the
first instant it reads END (or later), which decides the days the clocks change:

- spring forward (Berlin's 02:00 becomes 03:00): a START or END the clock skips is the jump,
  the first instant the clock reads it or later: `02:30-04:00` opens at 03:00 CEST, and
  `01:00-02:30` closes at 03:00 CEST. A window wholly inside the skipped hour would last no
  time at all: it opens at the jump and lasts as long as it says (`02:00-02:30` runs 03:00 to
  03:30 CEST), so a window never silently vanishes;
- fall back (Berlin's 03:00 becomes 02:00 again): a time the clock shows twice is its first
  showing (zoneinfo's `fold=0`), for START and END alike: `02:10-02:50` runs once, 02:10 to
  02:50 CEST, and not again when the clock repeats the hour; `01:00-03:00` runs from 01:00
  CEST until the clock first reads 03:00, at 03:00 CET: three hours, both showings inside.

Every instant here is an aware datetime; those returned are in UTC (two datetimes of one
ZoneInfo compare by wall clock, fold ignored: wrong across a fall back).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from rollguard.roller.roll.gates.keeper import Closed, GateKind
from rollguard.shared.converters import format_duration
from rollguard.shared.suggest import did_you_mean

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # date.weekday()'s order
DAY = 86400  # seconds
# A pattern of days repeats every week: looking this many days around an instant finds every
# window it is in, and the next opening of any window with at least one day.
HORIZON = 8

EXAMPLE = '"Mon-Fri 22:00-05:00 Europe/Berlin"'
_DAYS_FORM = (
    "give Mon, Tue, Wed, Thu, Fri, Sat or Sun, a range such as Mon-Fri (Fri-Mon wraps past "
    "Sunday), a comma list such as Sat,Sun, or * for every day"
)
_RANGE_FORM = (
    "give START-END as HH:MM or HH:MM:SS, e.g. 22:00-05:00 (an END before START passes "
    "midnight, 24:00 ends the day)"
)
_ZONE_FORM = "give an IANA time zone such as Europe/Berlin, America/New_York or UTC"
_TIME = re.compile(r"([0-9]{1,2}):([0-9]{2})(?::([0-9]{2}))?")


@dataclass(frozen=True, slots=True)
class Window:
    """One restart window (see the module docstring)."""

    text: str  # as given (spaces normalised), for messages
    days: frozenset[int]  # the days it starts on, date.weekday() numbers
    start: int  # seconds after midnight, 0 to 86399
    end: int  # seconds after midnight, 1 to 86400 (24:00); before `start`: the next day
    zone: ZoneInfo

    @property
    def length(self) -> int:
        """Seconds from START to END on the clock."""
        return self.end - self.start if self.end > self.start else self.end + DAY - self.start

    def contains(self, instant: datetime) -> bool:
        """Whether the window is open at `instant` (aware)."""
        at = _utc(instant)
        first = at.astimezone(self.zone).date() - timedelta(days=2)
        return any(opens <= at < closes for opens, closes in _occurrences(self, first, 4))


def parse_window(text: str) -> Window:
    """`DAYS START-END ZONE` as a Window; ValueError naming the bad part and the form."""
    parts = text.split()
    if len(parts) != 3:
        raise ValueError(f"{text!r} is not a window: give DAYS START-END ZONE, e.g. {EXAMPLE}")
    given = " ".join(parts)
    days, span, key = parts
    start, end = _span(given, span)
    return Window(given, _days(given, days), start, end, _zone(given, key))


def next_opening(windows: Iterable[Window], now: datetime) -> datetime | None:
    """The earliest START at or after `now` among `windows` (UTC); None only without windows."""
    found = _next(windows, now)
    return found[0] if found is not None else None


def current_close(windows: Iterable[Window], now: datetime) -> datetime | None:
    """When the open window containing `now` closes (UTC), through any window that overlaps
    or abuts it (the roll may go on there). None: no window is open now, or together they
    never close (they cover the whole week)."""
    at = _utc(now)
    spans: list[tuple[datetime, datetime]] = []
    for window in windows:
        first = at.astimezone(window.zone).date() - timedelta(days=2)
        spans += _occurrences(window, first, HORIZON + 3)
    ends = [closes for opens, closes in spans if opens <= at < closes]
    if not ends:
        return None
    close = max(ends)
    for opens, closes in sorted(spans):
        if opens > close:
            break
        close = max(close, closes)
    return None if close - at > timedelta(days=7) else close


class WindowGate:
    """Closed outside every window, until the next opens. Not budgeted (gates.Closed): a roll
    waits for its window for as long as it takes. `now` is the clock it is read by (aware)."""

    kind = GateKind.WINDOW

    def __init__(
        self, windows: Sequence[Window], *, now: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.windows = tuple(windows)
        self.name = "; ".join(w.text for w in self.windows)
        self._now = now
        self._reason: tuple[datetime, str] | None = None  # (opening, its reason): _reason_for

    async def check(self) -> Closed | None:
        now = _utc(self._now())
        if any(window.contains(now) for window in self.windows):
            return None
        found = _next(self.windows, now)
        if found is None:
            reason = f"outside every restart window ({self.name}); none opens again"
            return Closed(self.kind, self.name, reason)
        opens_at, window = found
        return Closed(
            self.kind, self.name, self._reason_for(now, opens_at, window), opens_at=opens_at
        )

    def _reason_for(self, now: datetime, opens_at: datetime, window: Window) -> str:
        """The reason, its countdown as of the first check that found this opening: the roll
        says what holds it once a change of the reason (GateKeeper), not once a poll."""
        if self._reason is None or self._reason[0] != opens_at:
            wait = format_duration(math.ceil((opens_at - now).total_seconds()))
            when = describe_instant(opens_at, window)
            reason = (
                f"outside every restart window ({self.name}); the next opens {when} (in {wait})"
            )
            self._reason = (opens_at, reason)
        return self._reason[1]


def describe_instant(instant: datetime, window: Window) -> str:
    """`Tue 22:00 Europe/Berlin`: `instant` on `window`'s clock (seconds when not zero)."""
    local = instant.astimezone(window.zone)
    clock = local.strftime("%H:%M:%S" if local.second else "%H:%M")
    return f"{DAY_NAMES[local.weekday()]} {clock} {window.zone.key}"


def _next(windows: Iterable[Window], now: datetime) -> tuple[datetime, Window] | None:
    at = _utc(now)
    found: tuple[datetime, Window] | None = None
    for window in windows:
        first = at.astimezone(window.zone).date() - timedelta(days=1)
        for opens, _ in _occurrences(window, first, HORIZON + 1):
            if opens >= at and (found is None or opens < found[0]):
                found = (opens, window)
    return found


def _occurrences(window: Window, first: date, count: int) -> list[tuple[datetime, datetime]]:
    """[opens, closes) in UTC of each of `window`'s days from `first`, `count` days on."""
    spans = []
    for offset in range(count):
        day = first + timedelta(days=offset)
        if day.weekday() not in window.days:
            continue
        opens = _first_reading(day, window.start, window.zone)
        closes = _first_reading(day, window.start + window.length, window.zone)
        if closes <= opens:
            # START and END both in the hour a spring forward skips: it opens at the jump
            # for as long as it says, rather than never (see the module docstring)
            closes = opens + timedelta(seconds=window.length)
        spans.append((opens, closes))
    return spans


def _first_reading(day: date, seconds: int, zone: ZoneInfo) -> datetime:
    """The first instant (UTC) at which `zone`'s clock reads `seconds` after `day`'s midnight
    (past 86400: a later day), or later."""
    # Aware arithmetic in one zone is wall-clock arithmetic: this is the clock reading.
    wall = datetime.combine(day, time(), tzinfo=zone) + timedelta(seconds=seconds)
    first = wall.astimezone(UTC)  # fold 0: of a time shown twice, its first showing
    second = wall.replace(fold=1).astimezone(UTC)
    if second >= first:
        return first
    # A skipped time (fold 0 reads it with the old offset, fold 1 with the new: the later
    # instant comes first). The jump is the first instant with the new offset, between the
    # two; offsets and transitions are whole seconds.
    before, after = second, first
    new_offset = first.astimezone(zone).utcoffset()
    while after - before > timedelta(seconds=1):
        middle = before + timedelta(seconds=(after - before).total_seconds() // 2)
        if middle.astimezone(zone).utcoffset() == new_offset:
            after = middle
        else:
            before = middle
    return after


def _days(text: str, given: str) -> frozenset[int]:
    if given == "*":
        return frozenset(range(7))
    days: set[int] = set()
    for item in given.split(","):
        first, dash, last = item.partition("-")
        low = _day(text, first)
        high = _day(text, last) if dash else low
        days.update((low + step) % 7 for step in range((high - low) % 7 + 1))
    return frozenset(days)


def _day(text: str, word: str) -> int:
    names = [name.lower() for name in DAY_NAMES]
    if word.lower() in names:
        return names.index(word.lower())
    hint = did_you_mean(word, DAY_NAMES)
    raise ValueError(f"{text!r}: {word!r} is not a day; {_DAYS_FORM}{hint}")


def _span(text: str, given: str) -> tuple[int, int]:
    start_text, dash, end_text = given.partition("-")
    if not dash or not start_text or not end_text:
        raise ValueError(f"{text!r}: {given!r} is not a time range; {_RANGE_FORM}")
    start, end = _clock(text, start_text), _clock(text, end_text)
    if start == DAY:
        raise ValueError(f"{text!r}: a window cannot start at {start_text}; {_RANGE_FORM}")
    if start == end:
        raise ValueError(
            f"{text!r}: {given} is an empty window (START equals END); a whole day is 00:00-24:00"
        )
    return start, end


def _clock(text: str, given: str) -> int:
    """Seconds after midnight; 86400 for 24:00 (an END only, checked by the caller)."""
    match = _TIME.fullmatch(given)
    if match is not None:
        hours, minutes, seconds = (int(part or 0) for part in match.groups())
        end_of_day = (hours, minutes, seconds) == (24, 0, 0)
        if minutes < 60 and seconds < 60 and (hours < 24 or end_of_day):
            return hours * 3600 + minutes * 60 + seconds
    raise ValueError(f"{text!r}: {given!r} is not a time; {_RANGE_FORM}")


def _zone(text: str, key: str) -> ZoneInfo:
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ZoneInfoNotFoundError: no such key; ValueError: not a key (`../x`) or not a TZif
        # file (`zone.tab`); OSError: a folder (`Europe`)
        known = available_timezones()
        if not known:
            raise ValueError(
                f"{text!r}: no IANA time zone database found to look up {key!r} (install the "
                "tzdata package of the system or of Python)"
            ) from None
        region = sorted(k for k in known if k.startswith(f"{key}/"))
        if region:
            raise ValueError(
                f"{text!r}: {key!r} is a region, not a time zone; give one of its zones, such "
                f"as {region[0]}"
            ) from None
        hint = did_you_mean(key, sorted(known))
        raise ValueError(f"{text!r}: {key!r} is not a time zone; {_ZONE_FORM}{hint}") from None


def _utc(instant: datetime) -> datetime:
    if instant.utcoffset() is None:
        raise ValueError(f"{instant.isoformat()} has no time zone: windows need aware datetimes")
    return instant.astimezone(UTC)
