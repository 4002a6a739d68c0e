"""`rollguard roll`, `rollguard plan` and `rollguard state`: the roll's commands.

    rollguard roll  (--inventory FILE | --namespace NS --selector SEL) --bootstrap HOST:PORT ...
    rollguard plan  (same flags): the same observation and decisions, printed; nothing restarted,
        nothing written
    rollguard state URL...: ask agents for their broker's state once, like curl

Every option can also be set as `ROLLGUARD_<OPTION>`. Exit codes: `roll` 0 rolled, 1 the roll
failed (the reason names the node and the cause), 2 bad flags, variables or files (nothing was
restarted), 3 interrupted by SIGINT or SIGTERM (resume with --resume ROLL_ID); `plan` 0, or 1
when the cluster cannot be observed; `state` 0 every agent reported, 1 some did not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollguard.roller.agent_client import AgentAnswer, AgentClient, AgentReport, broker_state_url
from rollguard.roller.model import Node
from rollguard.roller.options import (
    ENV_PREFIX,
    AgentOptions,
    OutputOptions,
    PlatformOptions,
    names,
)
from rollguard.roller.platform import Platform
from rollguard.roller.roll import expectations
from rollguard.roller.roll.display import LiveTable, on_terminal
from rollguard.roller.roll.journal import (
    ConfigMapJournalStore,
    EventLog,
    FileJournalStore,
    JournalStore,
)
from rollguard.roller.roll.kafka_admin import KafkaObserver, read_client_properties
from rollguard.roller.roll.lease import (
    KUBERNETES_LEASE,
    LEASE_FILE,
    FileLease,
    KubernetesLease,
    Lease,
    default_holder,
)
from rollguard.roller.roll.progress import RecoveryTracker
from rollguard.roller.roll.roller import OnAgentUnreachable, PlanEntry, Roller, RollSettings
from rollguard.shared.cli import ExitCode, run_until_signal
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.expectations import Budget, NodeExpectation
from rollguard.shared.retry import RetryStats
from rollguard.shared.settings import (
    boolean,
    choice,
    default_of,
    duration_between,
    format_duration,
    integer,
    milliseconds_to_duration,
    option,
    servers,
)


def _roll_id(text: str) -> str:
    if not (text.isascii() and text.replace("-", "").isalnum()) or len(text) > 40:
        raise ValueError(f"{text!r}: a roll id is letters, digits and dashes, 40 at most")
    return text.lower()


def _on_agent_unreachable(text: str) -> OnAgentUnreachable:
    return OnAgentUnreachable(choice(*(o.value for o in OnAgentUnreachable))(text))


def _rack_aware(text: str) -> bool | None:
    """auto (None: on when brokers report racks), or true/false."""
    return None if text.strip().lower() == "auto" else boolean(text)


def _default(name: str) -> str:
    """A RollSettings default in the option's syntax: the library's default is the CLI's."""
    value = default_of(RollSettings, name)
    return value.value if isinstance(value, OnAgentUnreachable) else format_duration(value)


def _duration(name: str, low: str, high: str, help: str, **kwargs: Any) -> Any:
    return option(_default(name), duration_between(low, high), help, "DURATION", **kwargs)


@dataclass(frozen=True, kw_only=True)
class StateOptions(AgentOptions, OutputOptions):
    """`rollguard state`'s options."""


@dataclass(frozen=True, kw_only=True)
class RollOptions(AgentOptions, OutputOptions, PlatformOptions):
    """`rollguard roll` and `rollguard plan`: every option, with its default written once (the
    roll's timings are `RollSettings`' defaults)."""

    bootstrap: str = option(
        None,
        servers,
        "Kafka bootstrap servers HOST:PORT[,...] for the Admin API",
        "SERVERS",
        required=True,
    )
    kafka_properties: Path | None = option(
        None, Path, "Kafka client properties file (TLS, SASL)", "FILE"
    )
    operation_timeout: float = _duration(
        "operation_timeout",
        "10ms",
        "7d",
        "how long a node may take to become ready before its agent decides",
        deprecated=(("operation-timeout-ms", milliseconds_to_duration),),
    )
    poll_interval: float = _duration(
        "poll_interval", "10ms", "1h", "time between readiness, safety and agent checks"
    )
    max_recovery_wait: float = _duration(
        "max_recovery_wait",
        "10ms",
        "30d",
        "longest wait for a broker in log recovery that makes progress",
    )
    stall_timeout: float = _duration(
        "stall_timeout", "10ms", "7d", "a recovery with no progress for this long is stalled"
    )
    restart_timeout: float = option(
        "5m",
        duration_between("10ms", "1d"),
        "time limit of an inventory restart command",
        "DURATION",
    )
    safety_wait: float = _duration(
        "safety_wait",
        "10ms",
        "30d",
        "how long a roll waits without progress for a restart to become safe and for a "
        "restarted broker to rejoin its ISRs",
    )
    on_agent_unreachable: OnAgentUnreachable = option(
        _default("on_agent_unreachable"),
        _on_agent_unreachable,
        "a node whose agent cannot answer: wait (within --safety-wait) or force (restart it "
        "after --operation-timeout)",
        "wait|force",
    )
    max_clock_skew: float = _duration(
        "max_clock_skew",
        "10ms",
        "1d",
        "largest clock difference between the roller and an agent before anything is done",
    )
    only: frozenset[str] = option(
        "", names, "restart only these nodes (comma-separated names)", "NODES"
    )
    skip: frozenset[str] = option(
        "", names, "never restart these nodes (comma-separated names)", "NODES"
    )
    all: bool = option(
        "false",
        boolean,
        "on Kubernetes, restart pods that are already up to date too (a switch)",
        switch=True,
    )
    max_batch_size: int = option(
        "1",
        integer(1, 100_000),
        "restart up to N brokers at once when no partition can spare fewer (1: one at a time)",
        "N",
    )
    rack_aware: bool | None = option(
        "auto",
        _rack_aware,
        "batches of one rack first (auto: when brokers report racks; false: ignore racks)",
        "auto|true|false",
    )
    elect_preferred_leaders: bool = option(
        "true",
        boolean,
        "after each batch, elect the preferred leaders of its brokers' partitions",
        "true|false",
    )
    roll_id: str | None = option(
        None, _roll_id, "id of a new roll (default: time and random)", "ID"
    )
    resume: str | None = option(None, _roll_id, "resume the roll with this id", "ID")
    expectations: Path | None = option(
        None,
        Path,
        "expectations.json from rollguard-report: per-node recovery budgets from history "
        "(never above --max-recovery-wait) and a predicted roll duration",
        "FILE",
    )
    restart_estimate: float = option(
        "1m",
        duration_between("10ms", "1d"),
        "with --expectations: time one restart takes without log recovery (stop, start, "
        "ISR catch-up), for the prediction",
        "DURATION",
    )
    state_dir: Path = option(".rollguard", Path, "folder of roll journals and event logs", "DIR")

    def settings(self) -> RollSettings:
        return RollSettings(
            operation_timeout=self.operation_timeout,
            poll_interval=self.poll_interval,
            max_recovery_wait=self.max_recovery_wait,
            stall_timeout=self.stall_timeout,
            safety_wait=self.safety_wait,
            on_agent_unreachable=self.on_agent_unreachable,
            max_clock_skew=self.max_clock_skew,
            only=self.only,
            skip=self.skip,
            all_nodes=self.all,
            max_batch_size=self.max_batch_size,
            rack_aware=self.rack_aware,
            elect_preferred_leaders=self.elect_preferred_leaders,
        )


def check_state_dir(folder: Path) -> None:
    """Refuse, before anything starts, a --state-dir the roll could not write its journal to."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing == folder and not folder.is_dir():
        raise ConfigError(f"--state-dir {folder}: exists and is not a directory")
    if not existing.is_dir():
        raise ConfigError(f"--state-dir {folder}: cannot be created, {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == folder else f"cannot be created in {existing}"
        raise ConfigError(f"--state-dir {folder}: {what}")


def add_parsers(sub: Any) -> None:
    state = sub.add_parser(
        "state",
        help="ask agents for their broker's state once",
        description="Ask agents for their broker's state once, like curl. Example:\n"
        "  rollguard state --cert roller.crt --key roller.key --cacert ca.crt "
        "https://kafka-0.kafka.prod.svc:8443",
    )
    state.add_argument(
        "urls", nargs="+", metavar="URL", help="agent URL, e.g. https://kafka-0.kafka.prod.svc:8443"
    )
    StateOptions.add_flags(state, ENV_PREFIX)
    state.set_defaults(run=state_command)
    for name, text, example in (
        (
            "roll",
            "roll the cluster, never restarting a broker in recovery",
            "rollguard roll --inventory nodes.yaml --bootstrap kafka-0:9092 --cert roller.crt "
            "--key roller.key --cacert ca.crt",
        ),
        (
            "plan",
            "print what a roll would do now; restart nothing, write nothing",
            "rollguard plan --namespace kafka --selector strimzi.io/cluster=prod "
            "--bootstrap prod-kafka-bootstrap:9092 --cert roller.crt --key roller.key "
            "--cacert ca.crt --output json",
        ),
    ):
        parser = sub.add_parser(
            name, help=text, description=f"{text[0].upper()}{text[1:]}. Example:\n  {example}"
        )
        RollOptions.add_flags(parser, ENV_PREFIX)
        parser.set_defaults(run=roll_command)


# ---- state ------------------------------------------------------------------------------
def describe(answer: AgentAnswer) -> str:
    if isinstance(answer, AgentReport):
        return answer.report.describe()
    status = f"HTTP {answer.status}" if answer.status is not None else "no HTTP answer"
    return f"unavailable ({status}, {answer.reason}): {answer.message}"


def as_json(answer: AgentAnswer) -> dict[str, Any]:
    if isinstance(answer, AgentReport):
        return {"url": answer.url, "status": 200, "report": answer.report.to_wire()}
    return {
        "url": answer.url,
        "status": answer.status,
        "error": answer.reason,
        "message": answer.message,
    }


async def query(urls: Sequence[str], client: AgentClient) -> list[AgentAnswer]:
    async with client:
        return list(await asyncio.gather(*(client.broker_state(url) for url in urls)))


async def _state(urls: Sequence[str], options: StateOptions, stats: RetryStats) -> int:
    answers = await query(urls, options.agent_client(stats))
    width = max(len(a.url) for a in answers)
    for answer in answers:
        if options.output == "json":
            print(json.dumps(as_json(answer)))
        else:
            print(f"{answer.url:<{width}}  {describe(answer)}")
    reported = sum(isinstance(a, AgentReport) for a in answers)
    print(
        f"{len(answers)} agents: {reported} reported, {len(answers) - reported} unavailable; "
        f"{stats.summary()}",
        file=sys.stderr,
    )
    return ExitCode.OK if reported == len(answers) else ExitCode.FAILED


def state_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = StateOptions.load(args, environ, ENV_PREFIX)
    urls = []
    for url in args.urls:
        try:
            urls.append(broker_state_url(url))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    stats = RetryStats()
    return run_until_signal(_state(urls, options, stats))


# ---- roll and plan ----------------------------------------------------------------------


def _platform(
    options: RollOptions, agents: AgentClient, stack: ExitStack, roll_id: str
) -> tuple[Platform, JournalStore, Lease]:
    """The platform, the roll journal's store and the cluster's lease: files in --state-dir for
    an inventory, a ConfigMap and a coordination.k8s.io Lease on Kubernetes."""
    folder = options.state_dir
    platform, sync_client = options.platform(
        agents, stack, restart_timeout=options.restart_timeout, folder=folder, roll_id=roll_id
    )
    if sync_client is None:
        lease: Lease = FileLease(folder / LEASE_FILE, holder=default_holder(), roll_id=roll_id)
        return platform, FileJournalStore(folder), lease
    from rollguard.roller.kubernetes import KubernetesPlatform

    assert isinstance(platform, KubernetesPlatform)
    namespace = platform.settings.namespace
    lease = KubernetesLease(
        platform.client,
        namespace,
        KUBERNETES_LEASE,
        holder=default_holder(),
        roll_id=roll_id,
    )
    return platform, ConfigMapJournalStore(sync_client, namespace), lease


def _new_roll_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


async def _run(command: str, options: RollOptions, stats: RetryStats, roll_id: str) -> int:
    folder = options.state_dir
    with ExitStack() as stack:
        agents = options.agent_client(stats)
        platform, journal, lease = _platform(options, agents, stack, roll_id)
        properties = {}
        if options.kafka_properties is not None:
            properties = read_client_properties(options.kafka_properties)
        kafka = KafkaObserver(options.bootstrap, properties)
        stack.callback(kafka.close)
        observer = kafka.observe
        settings = options.settings()
        # `plan` writes nothing: no events, no journal, no lease.
        events = EventLog(
            None if command == "plan" else folder / f"events-{roll_id}.jsonl", roll_id
        )
        try:
            nodes = await platform.nodes()
            display = LiveTable(nodes) if on_terminal() and options.output == "text" else None
            roller = Roller(
                platform,
                observer,
                agents,
                journal,
                events,
                settings=settings,
                policy=options.retry_policy(),
                lease=None if command == "plan" else lease,
                on_progress=_progress(display, options.output),
                elect_leaders=kafka.elect_preferred,
            )
            history = None
            if options.expectations is not None:
                history = history_for(options, nodes)
                roller.settings = replace(
                    settings,
                    recovery_budgets={
                        name: b.seconds for name, b in history.budgets.items() if b.from_history
                    },
                )
            if command == "plan":
                try:
                    entries = await roller.plan()
                except ConfigError:
                    raise
                except RollguardError as exc:
                    print(f"rollguard: plan failed: {exc}", file=sys.stderr)
                    return ExitCode.FAILED
                for entry in entries:
                    if options.output == "json":
                        print(json.dumps(entry.to_json()))
                    else:
                        print(f"{entry.node.name:<24} {entry.text()}")
                if history is not None:
                    history.announce(entries, options, events)
                return 0
            if history is not None:
                try:
                    history.announce(await roller.plan(), options, events)
                except RollguardError as exc:  # the roll itself says it better, at once
                    print(f"rollguard: no prediction: {exc}", file=sys.stderr)
            if display is not None:
                stack.enter_context(display)
            print(f"roll {roll_id}: journal and events in {folder}", file=sys.stderr)
            try:
                result = await roller.roll(roll_id, resume=options.resume is not None)
            except ConfigError:
                raise  # exit 2: nothing was restarted
            except RollguardError as exc:  # RollFailed, LeaseHeld, a platform's error...
                _finish(options, roll_id, "failed", str(exc), stats)
                return ExitCode.FAILED
            detail = f"restarted {len(result.restarted)}, skipped {len(result.skipped)}"
            if history is not None and history.predicted is not None:
                took = time.monotonic() - history.started
                detail += (
                    f"; took {format_duration(round(took))} against "
                    f"{format_duration(round(history.predicted))} predicted"
                )
            _finish(options, roll_id, "completed", detail, stats)
            return 0
        finally:
            await agents.aclose()
            await platform.close()


PROGRESS_EVERY = 5.0  # seconds between two recovery progress lines of one node, off a terminal


def _progress(display: LiveTable | None, output: str):  # type: ignore[no-untyped-def]
    last: dict[str, str] = {}
    last_line: dict[str, float] = {}

    def report(node: Node, text: str, tracker: RecoveryTracker | None) -> None:
        if display is not None:
            display.update(node, text, tracker)
        elif output == "json":
            entry: dict[str, Any] = {"node": node.name, "state": text}
            if tracker is not None and tracker.points:
                entry.update(
                    remainingLogs=tracker.points[-1].logs,
                    remainingSegments=tracker.points[-1].segments,
                    rate=tracker.rate(),
                    eta=tracker.eta(),
                )
            print(json.dumps(entry), flush=True)
        else:
            # One line per transition; while recovering, a progress line every few seconds.
            state = text.split(":")[0]
            now = time.monotonic()
            due = tracker is not None and now - last_line.get(node.name, 0.0) >= PROGRESS_EVERY
            if last.get(node.name) != state or due:
                last[node.name], last_line[node.name] = state, now
                print(f"{node.name}: {text}", file=sys.stderr, flush=True)

    return report


def _finish(
    options: RollOptions, roll_id: str, outcome: str, detail: str, stats: RetryStats
) -> None:
    if options.output == "json":
        print(
            json.dumps(
                {
                    "rollId": roll_id,
                    "outcome": outcome,
                    "detail": detail,
                    "retries": stats.summary(),
                }
            )
        )
    else:
        print(f"roll {roll_id} {outcome}: {detail}; {stats.summary()}", file=sys.stderr)


def roll_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = RollOptions.load(args, environ, ENV_PREFIX)
    check_state_dir(options.state_dir)
    roll_id = options.resume or options.roll_id or _new_roll_id()

    def interrupted(signum: signal.Signals) -> None:
        if args.command == "roll":
            print(
                f"rollguard: interrupted by {signum.name}; resume with --resume {roll_id}",
                file=sys.stderr,
            )

    return run_until_signal(
        _run(args.command, options, RetryStats(), roll_id), interrupted=interrupted
    )


# ---- --expectations ------------------------------------------------------------------------


@dataclass
class History:
    """What --expectations gave this run: the cluster's entries, each node's budget, and the
    prediction once announced."""

    entries: dict[str, NodeExpectation]
    budgets: dict[str, Budget]
    started: float = field(default_factory=time.monotonic)
    predicted: float | None = None

    def announce(self, plan: list[PlanEntry], options: RollOptions, events: EventLog) -> None:
        prediction = expectations.predict(plan, self.entries, options.restart_estimate)
        self.predicted = prediction.seconds
        self.started = time.monotonic()
        if options.output == "json":
            print(json.dumps(expectations.prediction_json(prediction, self.budgets)), flush=True)
        else:
            for line in expectations.describe(prediction, self.budgets):
                print(line, file=sys.stderr)
        events.write(
            None,
            "roll-predicted",
            f"{len(prediction.batches)} restarts; without history: "
            f"{', '.join(prediction.without_history) or '-'}",
            seconds=prediction.seconds,
            upperSeconds=prediction.upper_seconds,
        )


def history_for(options: RollOptions, nodes: list[Node]) -> History:
    assert options.expectations is not None
    entries = expectations.for_nodes(options.expectations, options.cluster_name() or None, nodes)
    return History(entries, expectations.budgets(entries, nodes, options.max_recovery_wait))
