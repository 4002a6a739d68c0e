"""One roll per cluster (`rollguard.roller.roll.stores.lease`): a lease file raced for by real
processes, expiry and takeover with an injected clock, release, renewal. The Kubernetes Lease on
a real API server is tests/real/test_lease_kubernetes.py."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rollguard.roller.roll.rules.settings import RollSettings
from rollguard.roller.roll.stores.lease import (
    DEFAULT_DURATION,
    LeaseError,
    LeaseHeld,
    LeaseLost,
    default_holder,
    holding,
    keep_renewed,
)
from rollguard.roller.roll.stores.lease_file import FileLease
from rollguard.shared.errors import ConfigError

from helpers import ROOT, Clock

T0 = datetime(2026, 11, 23, 11, 0, 2, tzinfo=UTC).timestamp()
NS = "kafka"


def file_lease(tmp_path: Path, holder: str, roll_id: str, clock: Clock, **kw: Any) -> FileLease:
    """A lease file of 30 s unless said (the times below are written for it)."""
    kw.setdefault("duration", 30.0)
    return FileLease(tmp_path / "lease.json", holder=holder, roll_id=roll_id, clock=clock, **kw)


# --- the lease file ------------------------------------------------------------------------------

RACER = """
import asyncio, json, sys
from pathlib import Path
from rollguard.roller.roll.stores.lease import LeaseHeld, default_holder
from rollguard.roller.roll.stores.lease_file import FileLease
lease = FileLease(Path(sys.argv[1]), holder=default_holder(), roll_id=sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()  # the start gate: every racer is at this line before any goes on
try:
    asyncio.run(lease.acquire())
    print(json.dumps({"won": lease.holder}), flush=True)
except LeaseHeld as exc:
    print(json.dumps({"lost": str(exc), "holder": exc.holder, "roll": exc.roll_id}), flush=True)
# Alive until every racer has answered: a holder whose process is gone loses its lease to the
# next one (`holder_gone`), which would be a second winner of this race, rightly.
sys.stdin.readline()
"""


@pytest.mark.parametrize("round_", range(3))
def test_processes_racing_for_the_lease_file_exactly_one_wins(tmp_path: Path, round_: int) -> None:
    path = tmp_path / "state" / "lease.json"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(path), f"roll-{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for i in range(6)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline() == "ready\n"
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        answers = [json.loads(str(racer.stdout.readline())) for racer in racers]
        for racer in racers:
            racer.communicate(input="done\n", timeout=30)
    finally:
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
    winners = [a["won"] for a in answers if "won" in a]
    assert len(winners) == 1, answers
    (winner,) = winners
    winning_roll = f"roll-{[a.get('won') for a in answers].index(winner)}"
    assert json.loads(path.read_text())["holder"] == winner
    for lost in (a for a in answers if "lost" in a):
        assert (lost["holder"], lost["roll"]) == (winner, winning_roll)
        assert lost["lost"].startswith(f"cluster is being rolled by {winner} (roll {winning_roll})")


def test_a_held_lease_names_its_holder_its_roll_and_since_when(tmp_path: Path) -> None:
    clock = Clock(T0)
    asyncio.run(file_lease(tmp_path, "host:1234", "20261123-1100-ab12", clock).acquire())
    clock.now += 5
    with pytest.raises(LeaseHeld) as held:
        asyncio.run(file_lease(tmp_path, "other:99", "20261123-1101-cd34", clock).acquire())
    assert str(held.value) == (
        "cluster is being rolled by host:1234 (roll 20261123-1100-ab12) since "
        "2026-11-23T11:00:02Z; its lease expires in 25s"
    )
    assert held.value.since == datetime(2026, 11, 23, 11, 0, 2, tzinfo=UTC)


def test_a_lease_whose_holder_died_on_this_host_is_taken_over_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)  # reaped: that pid runs nothing now (a killed -9 roller)
    clock = Clock(T0)
    host = socket.gethostname()
    asyncio.run(file_lease(tmp_path, f"{host}:{dead.pid}", "r1", clock).acquire())
    clock.now += 1  # well within the lease's 30 s
    with caplog.at_level(logging.WARNING, logger="rollguard.roller.roll.stores.lease_file"):
        asyncio.run(file_lease(tmp_path, f"{host}:{os.getpid()}", "r1", clock).acquire())
    assert "its process is gone" in caplog.text
    # A live holder on this host, and any holder on another host, still hold it.
    with pytest.raises(LeaseHeld):
        asyncio.run(file_lease(tmp_path, f"{host}:{os.getppid()}", "r1", clock).acquire())
    asyncio.run(file_lease(tmp_path, f"elsewhere:{dead.pid}", "r2", Clock(T0 + 100)).acquire())
    with pytest.raises(LeaseHeld):
        asyncio.run(file_lease(tmp_path, f"{host}:{os.getpid()}", "r3", Clock(T0 + 101)).acquire())


def test_the_lease_file_says_who_rolls_until_when(tmp_path: Path) -> None:
    clock = Clock(T0 + 0.25)
    asyncio.run(file_lease(tmp_path, "host:1", "r1", clock, duration=20).acquire())
    assert json.loads((tmp_path / "lease.json").read_text()) == {
        "version": 1,
        "holder": "host:1",
        "rollId": "r1",
        "acquiredAt": "2026-11-23T11:00:02.250Z",
        "renewedAt": "2026-11-23T11:00:02.250Z",
        "durationSeconds": 20.0,
        "expires": "2026-11-23T11:00:22.250Z",
    }
    assert (tmp_path / "lease.json.lock").exists()


def test_resuming_a_roll_whose_roller_still_renews_is_refused(tmp_path: Path) -> None:
    clock = Clock(T0)
    running = file_lease(tmp_path, "host:1", "r1", clock)
    asyncio.run(running.acquire())
    clock.now += 20
    asyncio.run(running.renew())
    clock.now += 20  # 40 s after the start, 20 s after the last renewal
    resume = file_lease(tmp_path, "host:2", "r1", clock)  # the same roll, another process
    with pytest.raises(LeaseHeld) as held:
        asyncio.run(resume.acquire())
    assert str(held.value) == (
        "cluster is being rolled by host:1 (roll r1) since 2026-11-23T11:00:02Z; its lease "
        "expires in 10s; that roller is still running this roll: resume it once it has stopped"
    )


def test_an_expired_lease_is_taken_over_and_its_old_holder_has_lost_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0)
    old = file_lease(tmp_path, "host:1", "r1", clock)
    asyncio.run(old.acquire())
    clock.now += 30  # renewedAt + duration == now: expired
    new = file_lease(tmp_path, "host:2", "r1", clock)
    with caplog.at_level(logging.WARNING, logger="rollguard.roller.roll.stores.lease_file"):
        asyncio.run(new.acquire())
    assert "took over the lease of host:1 (roll r1), which stopped renewing it 30s ago" in (
        caplog.text
    )
    data = json.loads((tmp_path / "lease.json").read_text())
    assert (data["holder"], data["acquiredAt"]) == ("host:2", "2026-11-23T11:00:32.000Z")
    with pytest.raises(LeaseLost, match=r"is now held by host:2 \(roll r1\)"):
        asyncio.run(old.renew())


def test_the_holder_may_acquire_again_and_keeps_its_since(tmp_path: Path) -> None:
    clock = Clock(T0)
    lease = file_lease(tmp_path, "host:1", "r1", clock)
    asyncio.run(lease.acquire())
    clock.now += 10
    asyncio.run(lease.acquire())
    data = json.loads((tmp_path / "lease.json").read_text())
    assert (data["acquiredAt"], data["renewedAt"]) == (
        "2026-11-23T11:00:02.000Z",
        "2026-11-23T11:00:12.000Z",
    )


def test_release_frees_the_lease_at_once_but_only_for_its_holder(tmp_path: Path) -> None:
    clock = Clock(T0)
    first = file_lease(tmp_path, "host:1", "r1", clock)
    asyncio.run(first.acquire())
    asyncio.run(first.release())
    assert not (tmp_path / "lease.json").exists()
    second = file_lease(tmp_path, "host:2", "r2", clock)
    asyncio.run(second.acquire())
    asyncio.run(first.release())  # not its lease any more: left alone
    assert json.loads((tmp_path / "lease.json").read_text())["holder"] == "host:2"
    asyncio.run(second.release())
    with pytest.raises(LeaseLost, match="was removed while roll r2 ran"):
        asyncio.run(second.renew())


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("not json", "Expecting value"),
        ('{"version": 9}', "version 9 is not 1"),
        ('{"version": 1, "holder": "h"}', "KeyError: 'rollId'"),
        (
            '{"version": 1, "holder": "h", "rollId": "r", "acquiredAt": "yesterday", '
            '"renewedAt": "x", "durationSeconds": 30}',
            "ValueError",
        ),
    ],
)
def test_a_lease_file_that_is_not_one_is_a_config_error(
    tmp_path: Path, content: str, why: str
) -> None:
    (tmp_path / "lease.json").write_text(content)
    with pytest.raises(ConfigError) as raised:
        asyncio.run(file_lease(tmp_path, "host:1", "r1", Clock(T0)).acquire())
    message = str(raised.value)
    assert message.startswith(f"lease file {tmp_path / 'lease.json'} is not a rollguard lease (")
    assert why in message and message.endswith("if no roll is running, remove it")
    assert "\n" not in message


def test_an_unusable_state_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("a file, not a folder")
    lease = FileLease(tmp_path / "state" / "lease.json", holder="h:1", roll_id="r1")
    with pytest.raises(ConfigError, match=r"lease file .*state/lease.json: cannot be written \("):
        asyncio.run(lease.acquire())


def test_default_holder_is_host_and_pid() -> None:
    host, pid = default_holder().rsplit(":", 1)
    assert host and int(pid) == os.getpid()


# --- keeping it renewed --------------------------------------------------------------------------


class FakeSleep:
    """Moves the clock instead of sleeping; `then` runs after a given call (a takeover...)."""

    def __init__(self, clock: Clock, stop_after: int, then: dict[int, Callable[[], Any]]) -> None:
        self.clock, self.stop_after, self.then, self.calls = clock, stop_after, then, 0

    async def __call__(self, seconds: float) -> None:
        self.calls += 1
        if self.calls > self.stop_after:
            raise asyncio.CancelledError
        self.clock.now += seconds
        action = self.then.get(self.calls)
        if action is not None:
            result = action()
            if asyncio.iscoroutine(result):
                await result


def test_keep_renewed_renews_every_interval_until_cancelled(tmp_path: Path) -> None:
    clock = Clock(T0)
    lease = file_lease(tmp_path, "host:1", "r1", clock)
    asyncio.run(lease.acquire())
    sleep = FakeSleep(clock, stop_after=3, then={})
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(keep_renewed(lease, 10, sleep=sleep, clock=clock))
    data = json.loads((tmp_path / "lease.json").read_text())
    assert data["renewedAt"] == "2026-11-23T11:00:32.000Z"  # three renewals, 10 s apart
    assert data["expires"] == "2026-11-23T11:01:02.000Z"


def test_keep_renewed_stops_with_lease_lost_when_taken_over(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0)
    lease = file_lease(tmp_path, "host:1", "r1", clock)
    asyncio.run(lease.acquire())

    def stall_then_take_over() -> Any:
        clock.now += 40  # the holder hung past its lease; another roller takes it
        return file_lease(tmp_path, "host:2", "r2", clock).acquire()

    sleep = FakeSleep(clock, stop_after=5, then={2: stall_then_take_over})
    with caplog.at_level(logging.ERROR), pytest.raises(LeaseLost, match="held by host:2"):
        asyncio.run(keep_renewed(lease, 10, sleep=sleep, clock=clock))
    assert sleep.calls == 2 and "held by host:2 (roll r2)" in caplog.text


class FlakyLease:
    """A lease whose renewals fail as listed (True: fails) - the strategy is under test here,
    not a store."""

    holder, duration = "host:1", 30.0

    def __init__(self, failures: list[bool]) -> None:
        self.failures, self.renewals = failures, 0

    def describe(self) -> str:
        return "flaky lease"

    async def acquire(self) -> None:
        pass

    async def renew(self) -> None:
        self.renewals += 1
        if self.failures[self.renewals - 1]:
            raise LeaseError("flaky lease: cannot renew it: 503 ServiceUnavailable")

    async def release(self) -> None:
        pass


def test_keep_renewed_rides_out_failed_renewals_while_the_lease_lasts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(T0)
    start = clock.now
    recovering = FlakyLease([True, True, False, False])
    sleep = FakeSleep(clock, 4, {})
    with caplog.at_level(logging.WARNING), pytest.raises(asyncio.CancelledError):
        asyncio.run(keep_renewed(recovering, 10, sleep=sleep, clock=clock))
    assert recovering.renewals == 4
    # failed at 10 and 12 s, renewed at 14, then every 10 s again: 24
    assert clock.now - start == 24
    assert caplog.text.count("503 ServiceUnavailable; retrying in 2s") == 2

    never = FlakyLease([True] * 20)
    with pytest.raises(LeaseLost, match=r"flaky lease: not renewed for 28s \(flaky lease: cannot"):
        asyncio.run(keep_renewed(never, 10, sleep=FakeSleep(clock, 20, {}), clock=clock))
    # at 10, 12, ... 28 s: the next try, at 30 s, could come after the lease expired
    assert never.renewals == 10


def test_keep_renewed_survives_an_api_refusing_everything_for_20_seconds() -> None:
    clock = Clock(T0)
    outage = (0.0, 0.0)

    class Outage(FlakyLease):
        duration = DEFAULT_DURATION  # the roll's own lease

        async def renew(self) -> None:
            self.renewals += 1
            if outage[0] <= clock.now < outage[1]:
                raise LeaseError("flaky lease: cannot renew it: 503 ServiceUnavailable")

    # The roll's own settings (a 60 s lease renewed every 10 s), the outage starting anywhere
    # in a renewal interval: at worst 10 + 20 s without a renewal, and a try 2 s later.
    interval = RollSettings().lease_renew_interval
    for tenth in range(0, 50):
        begin = clock.now + tenth / 10
        outage = (begin, begin + 20)
        lease = Outage([])
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(keep_renewed(lease, interval, sleep=FakeSleep(clock, 30, {}), clock=clock))
        assert lease.renewals == 30


def test_keep_renewed_needs_an_interval_below_the_duration() -> None:
    with pytest.raises(ValueError, match="below the duration"):
        asyncio.run(keep_renewed(FlakyLease([]), 30))


def test_holding_renews_while_the_block_runs_and_releases_after(tmp_path: Path) -> None:
    lease = FileLease(tmp_path / "lease.json", holder="host:1", roll_id="r1", duration=2)
    path = tmp_path / "lease.json"

    async def roll() -> None:
        async with holding(lease, interval=0.05):
            first = json.loads(path.read_text())["renewedAt"]
            deadline = time.monotonic() + 10
            while json.loads(path.read_text())["renewedAt"] == first:
                assert time.monotonic() < deadline, "never renewed"
                await asyncio.sleep(0.02)
            with pytest.raises(LeaseHeld):
                await FileLease(path, holder="host:2", roll_id="r2").acquire()

    asyncio.run(roll())
    assert not path.exists()


def test_a_lost_lease_cancels_the_block_and_raises_lease_lost_in_its_place(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lease.json"
    lease = FileLease(path, holder="host:1", roll_id="r1", duration=2)
    reached: list[str] = []

    async def roll() -> None:
        async with holding(lease, interval=0.05):
            thief = FileLease(path, holder="host:2", roll_id="r2", clock=lambda: time.time() + 60)
            await thief.acquire()
            reached.append("taken")
            await asyncio.sleep(30)  # the work: cut short by the loss, not finished
            reached.append("finished")

    started = time.monotonic()
    with pytest.raises(LeaseLost, match="held by host:2"):
        asyncio.run(roll())
    assert reached == ["taken"] and time.monotonic() - started < 10
    assert json.loads(path.read_text())["holder"] == "host:2"  # not released by the loser


def test_a_block_cancelled_from_outside_stays_cancelled(tmp_path: Path) -> None:
    lease = FileLease(tmp_path / "lease.json", holder="host:1", roll_id="r1", duration=2)

    async def roll() -> None:
        async with holding(lease, interval=0.05):
            task = asyncio.current_task()
            assert task is not None
            asyncio.get_running_loop().call_later(0.1, task.cancel)
            await asyncio.sleep(30)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(roll())
    assert not (tmp_path / "lease.json").exists()  # released on the way out


# --- the Kubernetes Lease ------------------------------------------------------------------------
