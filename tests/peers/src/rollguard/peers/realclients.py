"""Real Kafka clients that watch a roll from outside: an ISR sampler and a canary.

They are the tests' own eyes, never the product's: a safety claim about a roll on a real
cluster (never below min ISR, the quorum always led, nothing acknowledged lost) is judged by
them, and missing data is a failure, never a pass.

`IsrSampler` asks the Admin API for every partition's ISR (internal topics included) every
100 ms, from two clients half an interval apart, independently of the roller, and keeps the
worst it saw: a partition whose ISR went below its min ISR, or that had no leader; with
`quorum`, DescribeQuorum too (an answer without a leader counts; the seconds after the quorum's
leader was restarted, by the sampler's own answers, are its election: `elections`). Its watch
begins once every question has had an answer. A sample is the first answer of a round: an
attempt that fails (the broker the client asked is the one restarting) is tried
again at once, on whichever broker the client picks; a round with no answer within
`round_limit` (2 s, the blind-stretch bound), while the other client got none either, is an
error, with its time and cause.
Its coverage is measured: `longest_gap` is the longest time without a successful sample, from
the start of the watch to its end.

`Canary` is what a roll costs clients: a producer (acks=all, idempotent, a bounded delivery
timeout of 10 s) sending a numbered record every 100 ms (6 % of a core, where every 20 ms took a
quarter, beside a dozen JVMs in `make test`) and a consumer reading them back from every
partition of its topic (assigned, not a group: no rebalance of its own). Every send is
acknowledged or counted failed; once the watch ends, the consumer must read every acknowledged
number (`lost` is what it never read: acknowledged, then lost); send latencies (max, p99,
median) and the consumer's longest gap are reported. Its threads (and the clients' own, which
inherit it) ask for a higher scheduling priority where they may, as the sampler's process does:
beside a dozen JVMs a starved producer's batch expired with the cluster healthy.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rollguard.peers.processes import raise_priority


@dataclass
class IsrLow:
    topic: str
    partition: int
    isr: tuple[int, ...]
    min_isr: int
    at: float


@dataclass(frozen=True)
class SamplerError:
    at: float  # monotonic, when the round gave up
    what: str  # "isr" or "quorum"
    cause: str
    began: float = 0.0  # when the round began


def _within(at: float, windows: Iterable[tuple[float, float]]) -> bool:
    return any(start <= at <= end for start, end in windows)


class _Rounds:
    """Successful samples and failed rounds of one kind of question, from every client that
    asks it: a failed round is an error only when no client got an answer meanwhile (`blind`)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.times: list[float] = []
        self.failed: list[SamplerError] = []
        self.retried = 0  # failed attempts answered within their round

    def errors(self, since: float = 0.0) -> list[SamplerError]:
        """The failed rounds during which no other client got an answer either, from `since`
        (when the watch began: the first answer of every question)."""
        times = sorted(self.times)
        return [
            e for e in self.failed if e.at >= since and not any(e.began <= t <= e.at for t in times)
        ]

    def ask(self, question: Callable[[], Any], limit: float) -> Any | None:
        """One round: `question` asked until it answers, for up to `limit` seconds."""
        began = time.monotonic()
        deadline = began + limit
        while True:
            try:
                answer = question()
            except Exception as error:  # every failure is recorded
                if time.monotonic() >= deadline:
                    cause = repr(error)[:300]
                    self.failed.append(SamplerError(time.monotonic(), self.what, cause, began))
                    return None
                self.retried += 1
                time.sleep(0.05)
                continue
            self.times.append(time.monotonic())
            return answer

    def longest_gap(
        self, began: float, ended: float, excused: Iterable[tuple[float, float]] = ()
    ) -> float:
        """The longest stretch without an answer, leaving out the `excused` windows."""
        windows = list(excused)
        moments = sorted({began, *self.times, ended, *(t for w in windows for t in w)})
        moments = [t for t in moments if began <= t <= ended]
        return max(
            (b - a for a, b in itertools.pairwise(moments) if not _within((a + b) / 2, windows)),
            default=0.0,
        )


READY_S = 60  # the longest a sampler may take to get its first answers
# The longest the quorum may go without a leader after its leader is restarted: an election
# takes about a second on an idle machine, a few beside a dozen JVMs.
ELECTION_S = 10.0


class IsrSampler:
    """Threads describing every topic's partitions; `lows`: ISR below min ISR, or no leader.

    By default they run in a process of their own, which streams what they see to this one
    (`own_process`): a test's other threads (the canary's clients, its control server, pytest)
    share one interpreter lock, and on a loaded machine they starved the sampler's clients for
    seconds at a time. That process asks for a higher scheduling priority where it may."""

    def __init__(
        self,
        bootstrap: str,
        min_isr: dict[str, int],
        *,
        interval: float = 0.1,
        quorum: bool = False,
        round_limit: float = 2.0,
        own_process: bool = True,
    ) -> None:
        self.bootstrap = bootstrap
        self.own_process = own_process
        self._child: subprocess.Popen[str] | None = None
        self._child_ready = threading.Event()
        self._child_reader: threading.Thread | None = None
        self.quorum = quorum  # also ask DescribeQuorum: `leaderless` counts answers without one
        self.leaderless = 0
        self.leaders: list[tuple[float, int]] = []  # (monotonic, quorum leader) of each answer
        self.min_isr = min_isr  # per topic; topics not named use "*"
        self.interval = interval
        self.round_limit = round_limit
        self.lows: list[IsrLow] = []
        self._isr = _Rounds("isr")
        self._quorum = _Rounds("quorum")
        self.began = self.ended = 0.0
        self._stop = threading.Event()
        # Two threads, each with a client of its own, for each question, half an interval
        # apart: a slow DescribeQuorum (forwarded to the active controller) never delays the
        # ISR samples, and a client stuck on a broker going away never blinds the sampler.
        self._threads = [
            threading.Thread(target=self._run, args=(rounds, offset), daemon=True)
            for rounds in self._rounds
            for offset in (0.0, interval / 2)
        ]

    @property
    def _rounds(self) -> list[_Rounds]:
        return [self._isr, self._quorum] if self.quorum else [self._isr]

    @property
    def samples(self) -> int:
        return len(self._isr.times)

    @property
    def quorum_samples(self) -> int:
        return len(self._quorum.times)

    @property
    def quorum_times(self) -> list[float]:
        """When DescribeQuorum answered (monotonic)."""
        return list(self._quorum.times)

    @property
    def errors(self) -> list[SamplerError]:
        """Every round that got no answer, ISR and quorum, in time order."""
        since = self.began
        return sorted(self._isr.errors(since) + self._quorum.errors(since), key=lambda e: e.at)

    @property
    def retried(self) -> int:
        return self._isr.retried + self._quorum.retried

    def longest_gap(
        self,
        excused: Iterable[tuple[float, float]] = (),
        elections: Iterable[tuple[float, float]] = (),
    ) -> float:
        """The longest time without an ISR sample (and a quorum one, with `quorum`), from the
        start of the watch to its end, outside the `excused` windows (and, for the quorum, the
        `elections`): how long it was blind."""
        return max(self._gaps(list(excused), list(elections)).values())

    def _gaps(
        self, windows: list[tuple[float, float]], elections: list[tuple[float, float]]
    ) -> dict[str, float]:
        ended = self.ended or time.monotonic()
        gaps = {"isr": self._isr.longest_gap(self.began, ended, windows)}
        if self.quorum:
            gaps["quorum"] = self._quorum.longest_gap(self.began, ended, windows + elections)
        return gaps

    def unexpected_errors(
        self,
        expected: Iterable[tuple[float, float]] = (),
        elections: Iterable[tuple[float, float]] = (),
    ) -> list[SamplerError]:
        """The errors outside the `expected` windows (monotonic start, end): the moments the
        cluster was meant to be unreachable; the quorum's outside the `elections` too."""
        windows = list(expected)
        quorum_windows = windows + list(elections)
        return [
            e
            for e in self.errors
            if not _within(e.at, quorum_windows if e.what == "quorum" else windows)
        ]

    def assert_watched(
        self,
        *,
        max_gap: float = 2.0,
        expected: Iterable[tuple[float, float]] = (),
        elections: Iterable[tuple[float, float]] = (),
    ) -> None:
        """The watch covered the whole roll: no error, no blind stretch longer than `max_gap`,
        no partition below its min ISR nor leaderless, no quorum without a leader, but in the
        `expected` windows (monotonic start, end), when the cluster was meant to be
        unreachable (its only controller restarting), and, for the quorum alone, in the
        `elections` after its leader was restarted (`elections()`). Missing data fails."""
        windows, elected = list(expected), list(elections)
        assert self.samples > 0, "the ISR sampler never got an answer"
        unexpected = self.unexpected_errors(windows, elected)
        assert unexpected == [], (unexpected[:5], f"elections: {elected}")
        gaps = {k: round(v, 2) for k, v in self._gaps(windows, elected).items()}
        assert max(gaps.values()) <= max_gap, (
            f"blind for {max(gaps.values()):.1f} s: {gaps}; errors {self.errors[-3:]}; "
            f"elections {elected}"
        )
        lows = [low for low in self.lows if not _within(low.at, windows)]
        assert lows == [], lows[:5]
        if self.quorum:
            assert self.quorum_samples > 0 and self.leaderless == 0, self.leaderless

    def _run(self, rounds: _Rounds, offset: float) -> None:
        from kafka import KafkaAdminClient

        self._stop.wait(offset)
        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap,
            # An ISR question on a broker that is going away gives up soon: the next goes
            # elsewhere. DescribeQuorum has no elsewhere (every broker forwards it to the one
            # active controller): a lone controller just back, cold and on a loaded machine,
            # answered in more than 700 ms, and each question timed out until the sampler
            # was blind for 2.1 s (CI26); 1.5 s still leaves the other thread's question
            # inside the 2 s gap.
            request_timeout_ms=700 if rounds is self._isr else 1500,
            client_id=f"{rounds.what}-sampler",
        )
        question, check = (
            (admin.describe_topics, self._check)
            if rounds is self._isr
            else (admin.describe_metadata_quorum, self._check_quorum)
        )
        try:
            while not self._stop.is_set():
                answer = rounds.ask(question, self.round_limit)
                if answer is not None:
                    check(answer)
                self._stop.wait(self.interval)
        finally:
            admin.close()

    def _check(self, topics: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        for topic in topics:
            name = topic["name"]
            wanted = self.min_isr.get(name, self.min_isr.get("*", 1))
            for p in topic["partitions"]:
                # Kafka keeps the last ISR member listed while it is offline
                offline = set(p.get("offline_replicas") or ())
                isr = tuple(r for r in p["isr_nodes"] if r not in offline)
                leader = p.get("leader_id")
                if len(isr) < wanted or leader is None or leader < 0:
                    self.lows.append(IsrLow(name, p["partition_index"], isr, wanted, now))

    def _check_quorum(self, quorum: Any) -> None:
        try:
            leader = quorum["topics"][0]["partitions"][0]["leader_id"]
        except (KeyError, IndexError, TypeError):
            leader = -1
        if not isinstance(leader, int) or leader < 0:
            self.leaderless += 1
        else:
            self.leaders.append((time.monotonic(), leader))

    def leader_at(self, at: float) -> int | None:
        """The quorum's leader in the last answer before `at`, if any."""
        before = [leader for t, leader in self.leaders if t <= at]
        return before[-1] if before else None

    def elections(
        self, restarts: Iterable[tuple[float, int]], *, within: float = ELECTION_S
    ) -> list[tuple[float, float]]:
        """For each restart (monotonic time, node) of the node that led the quorum then, by
        this sampler's own answers: the `within` seconds after it, when the quorum may have no
        leader (Kafka elects another; no roller can restart the leader without that)."""
        return [(at, at + within) for at, node in restarts if self.leader_at(at) == node]

    def __enter__(self) -> IsrSampler:
        """Start the clients and return once every question has had an answer: the watch
        begins when the sampler can see (a client's first connection, under load, takes
        seconds, and is not the cluster's blindness); none within `READY_S` fails."""
        if self.own_process:
            return self._enter_process()
        started = time.monotonic()
        for thread in self._threads:
            thread.start()
        while not all(rounds.times for rounds in self._rounds):
            if time.monotonic() - started > READY_S:
                self.__exit__()
                failed = [e for r in self._rounds for e in r.failed][-3:]
                raise AssertionError(f"the sampler got no first answer in {READY_S} s: {failed}")
            time.sleep(0.05)
        self.began = max(min(rounds.times) for rounds in self._rounds)
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended = time.monotonic()
        if self.own_process:
            self._exit_process()
            return
        self._stop.set()
        for thread in self._threads:
            thread.join(10)

    # The sampler in a process of its own: it runs this class's threads and writes what they
    # saw, every 200 ms, as JSON lines (`_serve`); monotonic times are the host's, shared.

    def _enter_process(self) -> IsrSampler:
        config = {
            "bootstrap": self.bootstrap,
            "min_isr": self.min_isr,
            "interval": self.interval,
            "quorum": self.quorum,
            "round_limit": self.round_limit,
        }
        descriptor, path = tempfile.mkstemp(prefix="isr-sampler-", suffix=".err")
        self._stderr_path = path
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "rollguard.peers.realclients", json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=descriptor,
                text=True,
            )
        finally:
            os.close(descriptor)  # the child has its own
        self._child_reader = threading.Thread(target=self._read_child, daemon=True)
        self._child_reader.start()
        self._child_ready.wait(READY_S + 30)
        if not self.began:
            stderr = self._child_stderr()
            self._exit_process()
            raise AssertionError(f"the sampler did not start: {stderr}")
        return self

    def _child_stderr(self) -> str:
        try:
            with open(self._stderr_path, encoding="utf-8", errors="replace") as stderr:
                return stderr.read()[-2000:] or "no output"
        except OSError:
            return "no output"

    def _read_child(self) -> None:
        assert self._child is not None and self._child.stdout is not None
        try:
            for line in self._child.stdout:
                self._apply(json.loads(line))
        finally:
            self._child_ready.set()

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event["k"]
        rounds = self._isr if event.get("w") == "isr" else self._quorum
        if kind == "t":
            rounds.times.extend(event["v"])
        elif kind == "f":
            rounds.failed.append(
                SamplerError(event["at"], event["w"], event["cause"], event["began"])
            )
        elif kind == "r":
            rounds.retried += event["n"]
        elif kind == "low":
            self.lows.append(IsrLow(event["topic"], event["p"], tuple(event["isr"]),
                                    event["min"], event["at"]))  # fmt: skip
        elif kind == "l":
            self.leaders.extend((t, leader) for t, leader in event["v"])
        elif kind == "ll":
            self.leaderless += event["n"]
        elif kind == "ready":
            self.began = event["began"]
            self._child_ready.set()

    def _exit_process(self) -> None:
        child = self._child
        if child is None:
            return
        with contextlib.suppress(OSError):
            assert child.stdin is not None
            child.stdin.close()  # the sampler stops, writes what it saw last, and exits
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if self._child_reader is not None:
            self._child_reader.join(10)
        if child.stdout is not None:
            child.stdout.close()
        self._child = None
        stderr = self._child_stderr()
        with contextlib.suppress(OSError):
            os.unlink(self._stderr_path)
        if child.returncode != 0 and self.began:
            raise AssertionError(f"the sampler exited {child.returncode}: {stderr}")


class _Cursor:
    """What of a sampler's lists was already written (`_serve`)."""

    def __init__(self) -> None:
        self.at: dict[str, int] = {}

    def new(self, key: str, items: list[Any]) -> list[Any]:
        start, end = self.at.get(key, 0), len(items)
        self.at[key] = end
        return items[start:end]

    def delta(self, key: str, value: int) -> int:
        before, self.at[key] = self.at.get(key, 0), value
        return value - before


def _flush(sampler: IsrSampler, cursor: _Cursor, emit: Callable[[dict[str, Any]], None]) -> None:
    for rounds in sampler._rounds:
        w = rounds.what
        if times := cursor.new(f"t{w}", rounds.times):
            emit({"k": "t", "w": w, "v": times})
        for e in cursor.new(f"f{w}", rounds.failed):
            emit({"k": "f", "w": w, "at": e.at, "cause": e.cause, "began": e.began})
        if n := cursor.delta(f"r{w}", rounds.retried):
            emit({"k": "r", "w": w, "n": n})
    for low in cursor.new("low", sampler.lows):
        emit({"k": "low", "topic": low.topic, "p": low.partition, "isr": list(low.isr),
              "min": low.min_isr, "at": low.at})  # fmt: skip
    if leaders := cursor.new("l", sampler.leaders):
        emit({"k": "l", "v": leaders})
    if n := cursor.delta("ll", sampler.leaderless):
        emit({"k": "ll", "n": n})


def _serve(config: dict[str, Any]) -> int:
    """The sampler's own process: sample until stdin closes, writing what it saw."""
    logging.disable(logging.CRITICAL)  # the clients' complaints about brokers going away
    raise_priority()  # before its clients' threads are made
    lock = threading.Lock()

    def emit(event: dict[str, Any]) -> None:
        with lock:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()

    sampler = IsrSampler(
        config["bootstrap"],
        config["min_isr"],
        interval=config["interval"],
        quorum=config["quorum"],
        round_limit=config["round_limit"],
        own_process=False,
    )
    cursor = _Cursor()
    try:
        sampler.__enter__()
    except AssertionError as failed:
        print(failed, file=sys.stderr)
        return 1
    _flush(sampler, cursor, emit)
    emit({"k": "ready", "began": sampler.began})
    closed = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    while not closed.wait(0.2):
        _flush(sampler, cursor, emit)
    sampler.__exit__()
    _flush(sampler, cursor, emit)
    return 0


@dataclass
class CanaryReport:
    sent: int
    failed: int
    received: int
    p99_ms: float
    median_ms: float
    longest_gap_s: float
    errors: list[str] = field(default_factory=list)
    acknowledged: int = 0
    unanswered: int = 0  # neither acknowledged nor failed when the canary stopped
    lost: list[int] = field(default_factory=list)  # acknowledged, never read back
    max_ms: float = 0.0
    expected: int = 0  # the least number of sends for the time it watched (`Canary.report`)

    def row(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "failed": self.failed,
            "received": self.received,
            "lost": len(self.lost),
            "maxSendMs": round(self.max_ms, 1),
            "p99SendMs": round(self.p99_ms, 1),
            "medianSendMs": round(self.median_ms, 1),
            "longestConsumerGapS": round(self.longest_gap_s, 2),
        }

    def assert_no_harm(self, *, max_send_s: float = 10.0, max_gap_s: float = 15.0) -> None:
        """Every send acknowledged, every acknowledged record read back, latency and the
        consumer's longest gap within bounds. Too little traffic is missing data: a failure."""
        assert self.sent >= self.expected, self
        assert self.failed == 0 and self.unanswered == 0, self
        assert self.acknowledged == self.sent, self
        assert self.lost == [], f"acknowledged, never read back: {self.lost[:10]}"
        assert self.max_ms <= max_send_s * 1000, self
        assert self.longest_gap_s <= max_gap_s, self


# A bounded delivery timeout (it must cover linger + request timeout): a send that cannot be
# acknowledged within it fails, where the producer's default of 2 minutes would hide a
# min-ISR breach shorter than that behind latency.
DELIVERY_TIMEOUT_MS = 10_000


class Canary:
    """A producer and a consumer on `topic` for as long as the `with` block lasts."""

    def __init__(self, bootstrap: str, topic: str, *, every: float = 0.1) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.every = every
        self.run = uuid.uuid4().hex[:12].encode()  # this canary's records, among earlier ones
        self.latencies: list[float] = []
        # Each answered send as (wall time sent, latency; None: failed), each of ours read back
        # as its wall time: to cut into windows (the roll's own canary's, compared in a test).
        self.answers: list[tuple[float, float | None]] = []
        self.arrivals: list[float] = []
        self._started_at = self._stopped_at = 0.0
        self.acked: set[int] = set()
        self.failed = 0
        self.sent = 0
        self.seen: set[int] = set()
        self.received = 0
        self.longest_gap = 0.0
        self._last: float | None = None  # when the consumer last read one of ours
        self.errors: list[str] = []
        self.consumer_errors: list[str] = []
        self._lock = threading.Lock()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._consumer_ready = threading.Event()
        self._producer = threading.Thread(target=self._produce, daemon=True)
        self._consumer = threading.Thread(target=self._consume, daemon=True)

    def _produce(self) -> None:
        from kafka import KafkaProducer

        raise_priority()  # inherited by the producer's sender thread, made below
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
            request_timeout_ms=5000,
            max_block_ms=DELIVERY_TIMEOUT_MS,
            client_id="canary-producer",
        )
        self._consumer_ready.wait(60)
        try:
            while not self._stop_producing.is_set():
                number = self.sent
                started, wall = time.monotonic(), time.time()

                def done(
                    _: object, number: int = number, started: float = started, wall: float = wall
                ) -> None:
                    with self._lock:
                        self.latencies.append(time.monotonic() - started)
                        self.answers.append((wall, time.monotonic() - started))
                        self.acked.add(number)

                def failed(error: BaseException, wall: float = wall) -> None:
                    with self._lock:
                        self.answers.append((wall, None))
                        self.failed += 1
                        if len(self.errors) < 10:
                            self.errors.append(repr(error))

                self.sent += 1
                try:
                    future = producer.send(self.topic, self.run + b" %d" % number)
                except Exception as error:  # no metadata within max_block_ms
                    failed(error)
                else:
                    future.add_callback(done)
                    future.add_errback(failed)
                self._stop_producing.wait(self.every)
            with contextlib.suppress(Exception):  # what is left unanswered is counted
                producer.flush(DELIVERY_TIMEOUT_MS / 1000 + 5)
        finally:
            self._close(producer)

    def _close(self, producer: Any) -> None:
        """Close the producer, whatever is left in it: kafka-python's close() flushes first
        and raises on a batch it could not send, leaving the producer open (and its
        finaliser raising again, later, in another test)."""
        try:
            producer.close(10)
        except Exception as error:
            self.errors.append(f"close: {error!r}"[:300])
            sender = getattr(producer, "_sender", None)
            if sender is not None:
                sender.force_close()  # fails what is left, so that close() can end
                sender.join(10)
            try:
                producer.close(1)
            except Exception:
                producer._closed = True  # nothing more to send; its finaliser does nothing

    def _consume(self) -> None:
        """Read every partition from where it ended when the canary started; a consumer that
        raises out of poll() (no broker answers) is replaced and goes on from where the last
        one was."""
        from kafka import KafkaConsumer, TopicPartition

        raise_priority()
        positions: dict[Any, int] = {}
        while not self._stop_consuming.is_set():
            consumer = None
            try:
                consumer = KafkaConsumer(
                    bootstrap_servers=self.bootstrap,
                    group_id=None,
                    enable_auto_commit=False,
                    client_id="canary-consumer",
                )
                parts = consumer.partitions_for_topic(self.topic) or set()
                if not parts:
                    raise RuntimeError(f"no partitions for {self.topic} yet")
                assigned = [TopicPartition(self.topic, p) for p in sorted(parts)]
                consumer.assign(assigned)
                if positions:
                    for tp in assigned:
                        consumer.seek(tp, positions[tp])
                else:
                    consumer.seek_to_end(*assigned)
                    positions = {tp: consumer.position(tp) for tp in assigned}
            except Exception as error:  # no broker answers: try again
                self.consumer_errors.append(repr(error)[:200])
                if consumer is not None:
                    with contextlib.suppress(Exception):
                        consumer.close()
                self._stop_consuming.wait(1)
                continue
            self._consumer_ready.set()
            try:
                while not self._stop_consuming.is_set():
                    batches = consumer.poll(timeout_ms=200)
                    now = time.monotonic()
                    count = 0
                    for tp, records in batches.items():
                        for record in records:
                            run, _, number = (record.value or b"").partition(b" ")
                            if run == self.run:
                                self.seen.add(int(number))
                                count += 1
                            positions[tp] = record.offset + 1
                    if count:
                        with self._lock:
                            self.arrivals.append(time.time())
                            if self._last is not None and not self._stop_producing.is_set():
                                self.longest_gap = max(self.longest_gap, now - self._last)
                            self._last = now
                        self.received += count
            except Exception as error:  # the cluster went away under it
                self.consumer_errors.append(repr(error)[:200])
            finally:
                with contextlib.suppress(Exception):
                    consumer.close()

    def lost(self) -> list[int]:
        with self._lock:
            return sorted(self.acked - self.seen)

    def report(self) -> CanaryReport:
        with self._lock:
            latencies = sorted(self.latencies) or [0.0]
            acked, failed = len(self.acked), self.failed
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        return CanaryReport(
            self.sent,
            failed,
            self.received,
            p99 * 1000,
            statistics.median(latencies) * 1000,
            self.longest_gap,
            list(self.errors),
            acknowledged=acked,
            unanswered=self.sent - acked - failed,
            lost=self.lost(),
            max_ms=latencies[-1] * 1000,
            expected=self.expected(),
        )

    def expected(self) -> int:
        """The least number of sends that counts as having watched: a quarter of one every
        `every` seconds for the time it sent (its sends wait on metadata while a partition
        has no leader, and a loaded machine delays its thread), 20 at least (a one-node roll
        on a quiet machine lasts some 8 s). Fewer is missing data, not a pass."""
        sending = (self._stopped_at or time.monotonic()) - self._started_at
        return max(20, int(sending / self.every / 4))

    def __enter__(self) -> Canary:
        self._consumer.start()
        if not self._consumer_ready.wait(60):
            self._stop_consuming.set()
            raise AssertionError(f"the canary's consumer could not read {self.topic}")
        self._started_at = time.monotonic()
        self._producer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop sending, wait for every answer (the delivery timeout bounds it), then until
        the consumer has read every acknowledged record, for up to 30 s more."""
        self._stop_producing.set()
        self._stopped_at = time.monotonic()
        with self._lock:  # a gap still open when the sending stops counts too
            if self._last is not None:
                self.longest_gap = max(self.longest_gap, time.monotonic() - self._last)
        self._producer.join(DELIVERY_TIMEOUT_MS / 1000 + 20)
        deadline = time.monotonic() + 30
        while self.lost() and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop_consuming.set()
        self._consumer.join(30)


if __name__ == "__main__":  # the sampler's own process (IsrSampler(own_process=True))
    sys.exit(_serve(json.loads(sys.argv[1])))
