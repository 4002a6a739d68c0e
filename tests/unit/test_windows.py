"""Restart windows (`--window`): their syntax, when they are open (across midnight, week ends and
the days the clocks change) and the gate that holds a roll outside them (pure, `now` injected)."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rollguard.roller.roll.gates.keeper import Closed, GateKind
from rollguard.roller.roll.gates.windows import (
    DAY_NAMES,
    Window,
    WindowGate,
    current_close,
    next_opening,
    parse_window,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
EVERY_DAY = frozenset(range(7))


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def in_2024(text: str) -> datetime:
    """`03-31 01:00`, UTC, in 2024."""
    return datetime.fromisoformat(f"2024-{text}+00:00")


def span(text: str, now: str) -> tuple[datetime, datetime | None]:
    """The next opening of `text` at or after `now` (`in_2024`), and when that opening closes."""
    window = parse_window(text)
    opens = next_opening([window], in_2024(now))
    assert opens is not None
    return opens, current_close([window], opens)


# --- syntax ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "days", "start", "end", "zone"),
    [
        ("Mon-Fri 22:00-05:00 Europe/Berlin", {0, 1, 2, 3, 4}, 79200, 18000, "Europe/Berlin"),
        ("Sat,Sun 00:00-24:00 UTC", {5, 6}, 0, 86400, "UTC"),
        ("Mon-Sun 09:30-17:00 America/New_York", EVERY_DAY, 34200, 61200, "America/New_York"),
        ("Fri-Mon 01:00-02:00 UTC", {4, 5, 6, 0}, 3600, 7200, "UTC"),
        ("Sun-Sun 01:00-02:00 UTC", {6}, 3600, 7200, "UTC"),
        ("Mon,Wed-Thu,Sat 01:00-02:00 UTC", {0, 2, 3, 5}, 3600, 7200, "UTC"),
        ("* 12:00:30-12:01:45 Asia/Kolkata", EVERY_DAY, 43230, 43305, "Asia/Kolkata"),
        ("mon-FRI 9:05-10:00:00 UTC", {0, 1, 2, 3, 4}, 32700, 36000, "UTC"),
        ("Tue 23:59:59-24:00:00 UTC", {1}, 86399, 86400, "UTC"),
    ],
)
def test_a_window_is_days_a_time_range_and_a_zone(
    text: str, days: set[int], start: int, end: int, zone: str
) -> None:
    window = parse_window(text)
    assert (window.days, window.start, window.end, window.zone.key) == (days, start, end, zone)
    assert window.text == text


def test_the_text_is_kept_for_messages_with_its_spaces_made_single() -> None:
    assert parse_window("  Mon-Fri   22:00-05:00\tUTC ").text == "Mon-Fri 22:00-05:00 UTC"


FORM = "give DAYS START-END ZONE, e.g. "
DAYS_FORM = "give Mon, Tue, Wed, Thu, Fri, Sat or Sun, a range such as Mon-Fri"
RANGE_FORM = "give START-END as HH:MM or HH:MM:SS"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", f"'' is not a window: {FORM}"),
        ("Mon-Fri 22:00-05:00", f"'Mon-Fri 22:00-05:00' is not a window: {FORM}"),
        ("Mon, Tue 22:00-05:00 UTC", f"is not a window: {FORM}"),
        ("Tues 22:00-05:00 UTC", f"'Tues' is not a day; {DAYS_FORM}"),
        ("Tues 22:00-05:00 UTC", "; did you mean Tue?"),
        ("Monday 22:00-05:00 UTC", "'Monday' is not a day"),
        ("Mon,,Tue 22:00-05:00 UTC", "'' is not a day"),
        ("Mon- 22:00-05:00 UTC", "'' is not a day"),
        ("** 22:00-05:00 UTC", "'**' is not a day"),
        ("Mon 22:00 UTC", f"'22:00' is not a time range; {RANGE_FORM}"),
        ("Mon 22:00-05:00-06:00 UTC", f"'05:00-06:00' is not a time; {RANGE_FORM}"),
        ("Mon 25:00-05:00 UTC", f"'25:00' is not a time; {RANGE_FORM}"),
        ("Mon 22:60-05:00 UTC", "'22:60' is not a time"),
        ("Mon 22:00-05:00:60 UTC", "'05:00:60' is not a time"),
        ("Mon 22-05 UTC", "'22' is not a time"),
        ("Mon 22h-05h UTC", "'22h' is not a time"),
        ("Mon 24:00:01-05:00 UTC", "'24:00:01' is not a time"),
        ("Mon 24:00-05:00 UTC", "a window cannot start at 24:00"),
        ("Mon 05:00-05:00 UTC", "05:00-05:00 is an empty window (START equals END); a whole "),
        ("Mon 00:00-00:00 UTC", "a whole day is 00:00-24:00"),
        ("Mon 05:00-06:00 Europe/Berln", "'Europe/Berln' is not a time zone; give an IANA time "),
        ("Mon 05:00-06:00 Europe/Berln", "; did you mean Europe/Berlin?"),
        ("Mon 05:00-06:00 europe/berlin", "did you mean Europe/Berlin?"),
        ("Mon 05:00-06:00 Mars/Olympus", "'Mars/Olympus' is not a time zone"),
        ("Mon 05:00-06:00 Europe", "'Europe' is a region, not a time zone; give one of its "),
        ("Mon 05:00-06:00 ../etc/passwd", "'../etc/passwd' is not a time zone"),
        ("Mon 05:00-06:00 /etc/localtime", "'/etc/localtime' is not a time zone"),
        ("Mon 05:00-06:00 zone.tab", "'zone.tab' is not a time zone"),
        ("Mon 05:00-06:00 +02:00", "'+02:00' is not a time zone"),
    ],
)
def test_a_bad_window_is_refused_naming_the_part_and_the_form(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as refused:
        parse_window(text)
    assert "\n" not in str(refused.value)


def test_every_refusal_names_the_window_as_given() -> None:
    with pytest.raises(ValueError, match=r"^'Mon 25:00-05:00 UTC': '25:00' is not a time; give "):
        parse_window("Mon 25:00-05:00 UTC")


# --- when a window is open ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instant", "inside"),
    [
        (utc(2024, 6, 7, 21, 59, 59), False),  # Friday, before it opens
        (utc(2024, 6, 7, 22, 0, 0), True),  # Friday 22:00: open (the start belongs to it)
        (utc(2024, 6, 8, 4, 59, 59), True),  # Saturday morning: Friday's window still
        (utc(2024, 6, 8, 5, 0, 0), False),  # closed at its end
        (utc(2024, 6, 8, 23, 0, 0), False),  # Saturday night: Saturday is not one of its days
        (utc(2024, 6, 10, 2, 0, 0), False),  # Monday morning: Sunday's would be; none
        (utc(2024, 6, 10, 23, 0, 0), True),  # Monday night
    ],
)
def test_a_window_past_midnight_belongs_to_the_day_it_starts_on(
    instant: datetime, inside: bool
) -> None:
    assert parse_window("Mon-Fri 22:00-05:00 UTC").contains(instant) is inside


def test_a_wrapping_day_range_spans_the_week_end() -> None:
    window = parse_window("Fri-Mon 10:00-11:00 UTC")
    # 2024-06-07 is a Friday: Fri, Sat, Sun, Mon are in; Tue to Thu are not
    opened = [window.contains(utc(2024, 6, 7 + day, 10, 30)) for day in range(7)]
    assert opened == [True, True, True, True, False, False, False]


def test_a_window_passing_midnight_on_sunday_ends_on_monday() -> None:
    window = parse_window("Sun 22:00-02:00 UTC")
    assert window.contains(utc(2024, 6, 10, 1, 59))  # Monday 01:59
    assert not window.contains(utc(2024, 6, 10, 2, 0))
    assert next_opening([window], utc(2024, 6, 10, 2, 0)) == utc(2024, 6, 16, 22, 0)


def test_a_whole_day_ends_at_the_next_midnight() -> None:
    window = parse_window("Sat 00:00-24:00 UTC")
    assert window.contains(utc(2024, 6, 8, 23, 59, 59))
    assert not window.contains(utc(2024, 6, 9, 0, 0))
    assert current_close([window], utc(2024, 6, 8, 12)) == utc(2024, 6, 9)


def test_the_window_is_read_on_its_own_zones_clock() -> None:
    window = parse_window("Mon-Fri 22:00-05:00 Europe/Berlin")
    # 22:00 in Berlin in June (CEST) is 20:00 UTC; in January (CET), 21:00 UTC
    assert window.contains(utc(2024, 6, 11, 20, 0)) and not window.contains(utc(2024, 6, 11, 19))
    assert window.contains(utc(2024, 1, 9, 21, 0)) and not window.contains(utc(2024, 1, 9, 20))
    # any aware instant will do: the same moment on New York's clock
    assert window.contains(datetime(2024, 6, 11, 16, 0, tzinfo=NEW_YORK))


@pytest.mark.parametrize(
    ("now", "opening"),
    [
        (utc(2024, 6, 8, 10), utc(2024, 6, 10, 20)),  # Saturday: Monday 22:00 CEST
        (utc(2024, 6, 11, 3), utc(2024, 6, 11, 20)),  # inside Monday's: the next start
        (utc(2024, 6, 11, 20), utc(2024, 6, 11, 20)),  # at a start: that start
        (utc(2024, 6, 14, 20, 0, 1), utc(2024, 6, 17, 20)),  # just after Friday's: Monday's
    ],
)
def test_the_next_opening_is_the_earliest_start_at_or_after_now(
    now: datetime, opening: datetime
) -> None:
    found = next_opening([parse_window("Mon-Fri 22:00-05:00 Europe/Berlin")], now)
    assert found == opening and found.tzinfo is UTC


def test_of_several_windows_the_earliest_opens_next_and_any_one_open_is_enough() -> None:
    windows = [
        parse_window("Mon-Fri 22:00-05:00 Europe/Berlin"),
        parse_window("Sat,Sun 09:30-17:00 America/New_York"),
    ]
    # Saturday 2024-06-08 10:00 UTC: New York's opens at 13:30 UTC, before Monday's in Berlin
    assert next_opening(windows, utc(2024, 6, 8, 10)) == utc(2024, 6, 8, 13, 30)
    assert next_opening(windows, utc(2024, 6, 9, 21, 1)) == utc(2024, 6, 10, 20)
    assert any(w.contains(utc(2024, 6, 8, 14)) for w in windows)
    assert next_opening([], utc(2024, 6, 8)) is None


def test_the_close_follows_windows_that_overlap_or_abut_it() -> None:
    windows = [parse_window("Fri 22:00-02:00 UTC"), parse_window("Sat,Sun 00:00-24:00 UTC")]
    # Friday 23:00: Friday's runs into Saturday's, which abuts Sunday's: open until Monday
    assert current_close(windows, utc(2024, 6, 7, 23)) == utc(2024, 6, 10)
    assert current_close(windows[:1], utc(2024, 6, 7, 23)) == utc(2024, 6, 8, 2)
    assert current_close(windows, utc(2024, 6, 7, 21)) is None  # in none now
    assert current_close([parse_window("* 00:00-24:00 UTC")], utc(2024, 6, 7)) is None  # never


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="has no time zone"):
        parse_window("* 00:00-12:00 UTC").contains(datetime(2024, 6, 7, 3))


# --- the days the clocks change -------------------------------------------------------------
# Berlin, 2024-03-31: 02:00 CET becomes 03:00 CEST (01:00 UTC); 2024-10-27: 03:00 CEST becomes
# 02:00 CET (01:00 UTC). New York, 2024-03-10: 02:00 EST becomes 03:00 EDT (07:00 UTC);
# 2024-11-03: 02:00 EDT becomes 01:00 EST (06:00 UTC).


@pytest.mark.parametrize(
    ("text", "now", "opens", "closes"),
    [
        # a start the clock skips: the jump
        ("Sun 02:30-04:00 Europe/Berlin", "03-30 00:00", "03-31 01:00", "03-31 02:00"),
        # an end the clock skips: the jump
        ("Sun 01:00-02:30 Europe/Berlin", "03-30 00:00", "03-31 00:00", "03-31 01:00"),
        ("Sat 22:00-02:30 Europe/Berlin", "03-30 00:00", "03-30 21:00", "03-31 01:00"),
        # wholly skipped: at the jump, for as long as it says
        ("Sun 02:00-02:30 Europe/Berlin", "03-30 00:00", "03-31 01:00", "03-31 01:30"),
        ("Sun 02:15-02:45 America/New_York", "03-09 00:00", "03-10 07:00", "03-10 07:30"),
        # every day: on the local clock, so an hour earlier in UTC once summer time begins
        ("* 09:00-17:00 Europe/Berlin", "03-30 00:00", "03-30 08:00", "03-30 16:00"),
        ("* 09:00-17:00 Europe/Berlin", "03-31 00:00", "03-31 07:00", "03-31 15:00"),
    ],
)
def test_on_spring_forward_a_skipped_time_is_the_jump_and_no_window_vanishes(
    text: str, now: str, opens: str, closes: str
) -> None:
    assert span(text, now) == (in_2024(opens), in_2024(closes))


@pytest.mark.parametrize(
    ("text", "now", "opens", "closes"),
    [
        # a repeated start and end: their first showing, 40 minutes once
        ("Sun 02:10-02:50 Europe/Berlin", "10-26 00:00", "10-27 00:10", "10-27 00:50"),
        ("Sun 01:10-01:50 America/New_York", "11-02 00:00", "11-03 05:10", "11-03 05:50"),
        # a repeated end after a start before the repeated hour: its first showing
        ("Sat 23:00-02:30 Europe/Berlin", "10-26 00:00", "10-26 21:00", "10-27 00:30"),
        # an end past the repeated hour: the clock reaches it an hour later than it would
        ("Sun 01:00-03:00 Europe/Berlin", "10-26 00:00", "10-26 23:00", "10-27 02:00"),
        ("Sun 01:30-02:00 America/New_York", "11-02 00:00", "11-03 05:30", "11-03 07:00"),
    ],
)
def test_on_fall_back_a_repeated_time_is_its_first_showing(
    text: str, now: str, opens: str, closes: str
) -> None:
    assert span(text, now) == (in_2024(opens), in_2024(closes))


def test_on_fall_back_a_window_does_not_open_again_when_the_clock_repeats_it() -> None:
    window = parse_window("Sun 02:10-02:50 Europe/Berlin")
    assert window.contains(utc(2024, 10, 27, 0, 30))  # 02:30 CEST
    assert not window.contains(utc(2024, 10, 27, 1, 30))  # 02:30 CET, the second showing
    assert next_opening([window], utc(2024, 10, 27, 0, 51)) == utc(2024, 11, 3, 1, 10)


def test_on_spring_forward_the_skipped_hour_is_never_open_early() -> None:
    window = parse_window("Sun 02:30-04:00 Europe/Berlin")
    assert not window.contains(utc(2024, 3, 31, 0, 59, 59))  # 01:59:59 CET
    assert window.contains(utc(2024, 3, 31, 1))  # 03:00 CEST


# Around the changes of the clocks of 2024 (UTC): Berlin's and New York's, and Lord Howe
# Island's, which moves its clock by half an hour.
CHANGES = {
    "UTC": [],
    "Asia/Kolkata": [],
    "Europe/Berlin": [utc(2024, 3, 31, 1), utc(2024, 10, 27, 1)],
    "America/New_York": [utc(2024, 3, 10, 7), utc(2024, 11, 3, 6)],
    "Australia/Lord_Howe": [utc(2024, 4, 6, 15), utc(2024, 10, 5, 15, 30)],
}
YEARS = st.datetimes(datetime(2023, 1, 1), datetime(2026, 12, 31), timezones=st.just(UTC))
NEAR = st.integers(-3 * 86400, 3 * 86400).map(lambda seconds: timedelta(seconds=seconds))


@st.composite
def windows_and_instants(draw: st.DrawFn) -> tuple[Window, datetime]:
    """A window of any days and times in one of `CHANGES`' zones, and an instant: any, or
    within three days of a change of its clock."""
    key = draw(st.sampled_from(sorted(CHANGES)))
    start = draw(st.integers(0, 86399))
    end = draw(st.integers(1, 86400).filter(lambda end: end != start))
    days = draw(st.frozensets(st.sampled_from(DAY_NAMES), min_size=1))

    def clock(seconds: int) -> str:
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    window = parse_window(f"{','.join(days)} {clock(start)}-{clock(end)} {key}")
    changes = CHANGES[key]
    if changes and draw(st.booleans()):
        return window, draw(st.sampled_from(changes)) + draw(NEAR)
    return window, draw(YEARS)


@given(windows_and_instants())
def test_closed_until_the_next_opening_and_open_until_the_close(
    drawn: tuple[Window, datetime],
) -> None:
    window, now = drawn
    tick = timedelta(microseconds=1)
    if window.contains(now):
        close = current_close([window], now)
        assert close is None or (now < close and not window.contains(close))
        assert close is None or window.contains(close - tick)
        return
    opening = next_opening([window], now)
    assert opening is not None and now < opening <= now + timedelta(days=8)
    assert window.contains(opening) and not window.contains(opening - tick)


# --- the gate -------------------------------------------------------------------------------


def check(gate: WindowGate) -> Closed | None:
    return asyncio.run(gate.check())


def test_the_gate_is_open_inside_any_window() -> None:
    windows = [
        parse_window("Mon-Fri 22:00-05:00 Europe/Berlin"),
        parse_window("Sat 09:00-12:00 UTC"),
    ]
    for now in (utc(2024, 6, 11, 21), utc(2024, 6, 15, 10)):
        assert check(WindowGate(windows, now=lambda now=now: now)) is None


def test_outside_every_window_the_gate_says_when_the_next_opens() -> None:
    windows = [
        parse_window("Mon-Fri 22:00-05:00 Europe/Berlin"),
        parse_window("Sat 09:00-12:00 UTC"),
    ]
    gate = WindowGate(windows, now=lambda: utc(2024, 6, 11, 16, 48))  # Tuesday 18:48 CEST
    closed = check(gate)
    assert closed == Closed(
        GateKind.WINDOW,
        "Mon-Fri 22:00-05:00 Europe/Berlin; Sat 09:00-12:00 UTC",
        "outside every restart window (Mon-Fri 22:00-05:00 Europe/Berlin; Sat 09:00-12:00 UTC); "
        "the next opens Tue 22:00 Europe/Berlin (in 3h12m)",
        opens_at=utc(2024, 6, 11, 20),
    )
    assert not closed.budgeted  # a roll waits for its window as long as it takes
    assert closed.describe().startswith("window gate: outside every restart window (Mon-Fri ")


def test_the_gate_names_the_opening_on_that_windows_clock_with_seconds_when_given() -> None:
    gate = WindowGate(
        [parse_window("Sat 09:00:30-12:00 America/New_York")],
        now=lambda: utc(2024, 6, 8, 12, 59, 50),
    )
    closed = check(gate)
    assert closed is not None and closed.opens_at == utc(2024, 6, 8, 13, 0, 30)
    assert closed.reason.endswith("the next opens Sat 09:00:30 America/New_York (in 40s)")


def test_the_gate_says_each_opening_once_its_countdown_as_of_when_it_closed() -> None:
    # The roll says what holds it once a change of the reason: a countdown changing at each
    # poll would say it at each poll.
    clock = [utc(2024, 6, 11, 16, 48)]
    gate = WindowGate([parse_window("Tue-Wed 22:00-23:00 UTC")], now=lambda: clock[0])
    first = check(gate)
    clock[0] += timedelta(hours=1)
    later = check(gate)
    assert first is not None and later is not None and first.reason == later.reason
    assert first.reason.endswith("(in 5h12m)")
    clock[0] = utc(2024, 6, 11, 22, 30)
    assert check(gate) is None
    clock[0] = utc(2024, 6, 11, 23, 0)  # closed again: the next opening, said afresh
    again = check(gate)
    assert again is not None and again.opens_at == utc(2024, 6, 12, 22)
    assert again.reason.endswith("the next opens Wed 22:00 UTC (in 23h00m)")


def test_the_gate_reads_its_clock_at_each_check() -> None:
    clock = [utc(2024, 6, 11, 21, 59, 59)]
    gate = WindowGate([parse_window("Tue 22:00-23:00 UTC")], now=lambda: clock[0])
    assert check(gate) is not None
    clock[0] += timedelta(seconds=1)
    assert check(gate) is None


def test_a_gate_without_windows_is_closed_and_says_none_opens() -> None:
    closed = check(WindowGate([], now=lambda: utc(2024, 6, 11)))
    assert closed is not None and closed.opens_at is None
    assert closed.reason == "outside every restart window (); none opens again"
