"""`rollguard roll` and `rollguard plan`: the roll's commands (`rollguard state`: `state.py`).

    rollguard roll  (--inventory FILE | --namespace NS --selector SEL) --bootstrap HOST:PORT ...
    rollguard plan  (same flags): the same observation and decisions, printed with why each node
        is in the plan, its place in the order and what holds it; nothing restarted, nothing
        written (roll's own flags are accepted and ignored, with a warning)

Every option can also be set as `ROLLGUARD_<OPTION>`. Exit codes: `roll` 0 rolled, 1 the roll
failed (the reason names the node and the cause), 2 bad flags, variables, files or node names,
no journal to resume, or on Kubernetes a permission the roller's Role lacks (nothing was
restarted), 3 interrupted by SIGINT or SIGTERM (resume with --resume ROLL_ID); `plan` 0, 1 when
the cluster cannot be observed, or 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import secrets
import signal
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.options import (
    ENV_PREFIX,
)
from rollguard.roller.platform import Platform
from rollguard.roller.roll.cli import expectations
from rollguard.roller.roll.cli.configuring import compare, read_desired, with_configs
from rollguard.roller.roll.cli.display import LiveTable, finish, on_terminal, reporter
from rollguard.roller.roll.cli.gates import close_gates, gates_from, roll_canary
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.gates.pause import PauseGate
from rollguard.roller.roll.node.step import recovery_budget_of
from rollguard.roller.roll.planning import plan_lines
from rollguard.roller.roll.roller import Roller
from rollguard.roller.roll.stores.journal import (
    ConfigMapJournalStore,
    FileJournalStore,
    JournalStore,
    resumed_target,
)
from rollguard.roller.roll.stores.lease import Lease, default_holder
from rollguard.roller.roll.stores.lease_file import LEASE_FILE, FileLease
from rollguard.roller.roll.stores.lease_kubernetes import KUBERNETES_LEASE, KubernetesLease
from rollguard.roller.roll.upgrades.releases import UnknownRelease, target_refusal
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.cli import ExitCode, report_failure, run_until_signal
from rollguard.shared.converters import format_duration
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.logs import FAILURE, PROGRESS
from rollguard.shared.retry import RetryStats

if TYPE_CHECKING:
    from rollguard.roller.roll.metrics import RollMetrics
    from rollguard.roller.roll.metrics_server import MetricsServer

logger = logging.getLogger(__name__)
progress = logging.getLogger(PROGRESS)  # the roll's progress lines, on stderr


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


# What every roll and plan needs, then the sections of --help (the full list is 40 flags long).
USAGE = (
    "(--inventory FILE | --namespace NS --selector SELECTOR)\n"
    f"{'':22}--bootstrap SERVERS --cert PATH --key PATH --cacert PATH [options]"
)


PAUSE_HELP = (
    "\n\nA running roll is paused between nodes and resumed (see their --help):\n"
    "  rollguard roll pause --roll-id ID (--namespace NS | --state-dir DIR)\n"
    "  rollguard roll resume --roll-id ID (--namespace NS | --state-dir DIR)"
)


def add_parsers(sub: Any) -> None:
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
            name,
            help=text,
            description=f"{text[0].upper()}{text[1:]}. Example:\n  {example}"
            + (PAUSE_HELP if name == "roll" else ""),
            usage=f"rollguard {name} {USAGE}",
        )
        # Each command lists its own flags, by section; `plan` accepts roll's too, hidden.
        RollOptions.add_flags(parser, ENV_PREFIX, command=name)
        parser.set_defaults(run=roll_command)


# ---- roll and plan ----------------------------------------------------------------------


def _platform(
    options: RollOptions, agents: AgentClient, stack: ExitStack, roll_id: str, *, plan: bool
) -> tuple[Platform, JournalStore, Lease]:
    """The platform, the roll journal's store and the cluster's lease: files in --state-dir for
    an inventory, a ConfigMap and a coordination.k8s.io Lease on Kubernetes."""
    folder = options.state_dir
    # `plan` runs nothing on the hosts (no restart or health command, no log of them): an
    # inventory platform without a folder cannot.
    platform, sync_client = options.platform(
        agents,
        stack,
        restart_timeout=options.restart_timeout,
        folder=None if plan else folder,
        roll_id=roll_id,
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


async def _check_access(
    options: RollOptions, platform: Platform, command: str, roll_id: str
) -> None:
    """On Kubernetes, the roller's RBAC before its first call (`kubernetes_access`): a Role
    without a verb the command needs is exit 2 now, not a 403 half way through a roll."""
    if options.namespace is None:  # an inventory: no Kubernetes, and lightkube left unloaded
        return
    from rollguard.roller.kubernetes import KubernetesPlatform
    from rollguard.roller.kubernetes_access import check_access, plan_permissions, roll_permissions

    assert isinstance(platform, KubernetesPlatform)
    needed = (
        plan_permissions(configs=options.compare_config)
        if command == "plan"
        else roll_permissions(
            journal=ConfigMapJournalStore.name(roll_id),
            lease=KUBERNETES_LEASE,
            resume=options.resume is not None,
            configs=options.compare_config,
        )
    )
    await check_access(platform.client, platform.settings.namespace, needed)


async def _check_target(kafka: KafkaObserver, target: str) -> None:
    """ConfigError (exit 2, nothing done) for a target version that cannot run the cluster as
    its finalized features stand (a rollback after a finalize that raised metadata.version), or
    one older than the oldest release rollguard rolls onto."""
    try:
        refusal = target_refusal((await kafka.features()).finalized, target)
    except UnknownRelease as exc:
        raise ConfigError(f"--kafka-version {target}: {exc}") from None
    if refusal is not None:
        raise ConfigError(f"--kafka-version {target}: {refusal}")


def _new_roll_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


async def _run(command: str, options: RollOptions, stats: RetryStats, roll_id: str) -> int:
    folder = options.state_dir
    with ExitStack() as stack:
        agents = options.agent_client(stats)
        platform, journal, lease = _platform(
            options, agents, stack, roll_id, plan=command == "plan"
        )
        kafka = KafkaObserver.from_file(options.bootstrap, options.kafka_properties)
        stack.callback(kafka.close)
        observer = kafka.observe
        settings = options.settings()
        # `plan` writes nothing: no events, no journal, no lease.
        cluster = options.cluster_name()
        events = EventLog(
            None if command == "plan" else folder / f"events-{roll_id}.jsonl",
            roll_id,
            cluster=cluster or None,
        )
        # --canary: the roll's own client, from before the roll's first action to its end.
        canary = roll_canary(options, kafka, events) if command == "roll" else None
        if canary is not None:  # each node's figures in its journal record too
            journal = canary.journaled(journal)
        # A roll's own lease says when it is paused (`rollguard roll pause`); a plan holds none.
        paused = () if command == "plan" else (PauseGate(lease, roll_id),)
        gates = gates_from(options, kafka.consumer_lag, extra=paused, canary=canary)
        # --metrics-listen (a roll's, never a plan's): fed by its events, journal and lease.
        metrics: RollMetrics | None = None
        server: MetricsServer | None = None
        if command == "roll" and options.metrics_listen is not None:
            # prometheus_client only here: a roll without metrics does not pay its import.
            from rollguard.roller.roll.metrics import RollMetrics
            from rollguard.roller.roll.metrics_server import MetricsServer

            metrics = RollMetrics(roll_id, cluster or None)
            journal, lease = metrics.watch(events, journal, lease)
            server = MetricsServer(metrics.render)
        try:
            if server is not None and options.metrics_listen is not None:
                # First: an address in use is exit 2 before anything is done.
                address = await server.start(options.metrics_listen)
                progress.info("roll %s: metrics on http://%s/metrics", roll_id, address)
            # Before the first call: the pods listed, the lease taken, the journal written.
            await _check_access(options, platform, command, roll_id)
            nodes = await platform.nodes()
            if canary is not None:  # which partitions are whose, to lead them again
                canary.node_ids = {n.name: n.node_id for n in nodes}
            # A live table only for a person at a terminal; anything else gets plain lines.
            display = (
                LiveTable(nodes)
                if on_terminal() and options.output == "text" and options.log_format == "text"
                else None
            )
            progress.info(
                "%s: %d node%s; asking Kafka at %s (Admin API) and the agents",
                command,
                len(nodes),
                "" if len(nodes) == 1 else "s",
                options.bootstrap,
            )
            # --expectations: each node's recovery budget from its history, when it has one.
            history = None
            if options.expectations is not None:
                history = expectations.history_for(
                    options.expectations,
                    cluster or None,
                    nodes,
                    options.max_recovery_wait,
                )
                settings = replace(
                    settings,
                    recovery_budgets={
                        name: b.seconds for name, b in history.budgets.items() if b.from_history
                    },
                )
            if settings.kafka_version is not None:  # before anything: can it run this cluster?
                await _check_target(kafka, settings.kafka_version)
            if options.resume is not None:  # a resumed upgrade goes on to its journal's version
                record = await asyncio.to_thread(journal.load, roll_id)
                if record is not None:
                    target = resumed_target(record, settings.kafka_version)
                    settings = replace(settings, kafka_version=target)
            # Each node's desired configuration (an inventory's config/config-command, or with
            # --compare-config the pods' ConfigMaps), read before Kafka is asked (a bad one is
            # exit 2), and what Kafka says of it.
            desired = await read_desired(options, platform, nodes)
            configs = await compare(desired, nodes, kafka)
            roller = Roller(
                platform,
                observer,
                agents,
                journal,
                events,
                settings=settings,
                policy=options.retry_policy(),
                lease=None if command == "plan" else lease,
                on_progress=reporter(display, options.output),
                elect_leaders=kafka.elect_preferred,
                gates=gates,
                configs=configs.live(nodes) if configs is not None else None,
            )
            if command == "plan":
                try:
                    entries = await roller.plan()
                    if configs is not None:
                        entries = with_configs(entries, configs.compared)
                except ConfigError:
                    raise
                except RollguardError as exc:
                    json_output = options.output == "json"
                    return report_failure(
                        f"plan failed: {exc}", ExitCode.FAILED, json_output=json_output
                    )
                if options.output == "json":
                    for entry in entries:
                        print(json.dumps(entry.to_json()))
                else:
                    print("\n".join(plan_lines(entries)))
                if history is not None:
                    history.announce(entries, options.restart_estimate, options.output, events)
                return 0
            if history is not None:
                try:
                    # The roll checks its agents itself, at once.
                    entries = await roller.plan(check_agents=False)
                    history.announce(entries, options.restart_estimate, options.output, events)
                except RollguardError as exc:  # the roll itself says it better, at once
                    logger.warning("no prediction: %s", exc)
            progress.info("roll %s: journal and events in %s", roll_id, folder)
            if metrics is not None:
                budget = partial(recovery_budget_of, s=roller.settings)
                metrics.follow([n.name for n in nodes], budget)
            # The table is gone before the outcome is printed: it is stdout's, not the table's.
            with display if display is not None else contextlib.nullcontext():
                try:
                    async with canary or contextlib.nullcontext():
                        result = await roller.roll(roll_id, resume=options.resume is not None)
                except ConfigError:
                    raise  # exit 2: nothing was restarted
                except RollguardError as exc:  # RollFailed, LeaseHeld, a platform's error...
                    failure: RollguardError | None = exc
                else:
                    failure = None
            for line in canary.lines() if canary else ():  # what each restart cost
                progress.info("%s", line)
            if failure is not None:
                finish(options.output, options.state_dir, roll_id, "failed", str(failure), stats)
                return ExitCode.FAILED
            detail = f"restarted {len(result.restarted)}, skipped {len(result.skipped)}"
            if result.configured:
                detail += f", configured live {len(result.configured)}"
            if result.held:
                detail += (
                    f", held {', '.join(result.held)} (`rollguard roll --resume {roll_id}` "
                    "without --hold takes them)"
                )
            if history is not None and history.predicted is not None:
                took = time.monotonic() - history.started
                detail += (
                    f"; took {format_duration(round(took))} against "
                    f"{format_duration(round(history.predicted))} predicted"
                )
            finish(options.output, options.state_dir, roll_id, "completed", detail, stats)
            return 0
        finally:
            if server is not None:  # the roll is over (done, failed or interrupted)
                await server.stop()
            await agents.aclose()
            await platform.close()
            await close_gates(gates)


def roll_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = RollOptions.load(args, environ, ENV_PREFIX, command=args.command)
    if args.command == "roll":  # `plan` writes nothing
        check_state_dir(options.state_dir)
    roll_id = options.resume or options.roll_id or _new_roll_id()

    def interrupted(signum: signal.Signals) -> None:
        if args.command == "roll":
            failure = logging.getLogger(FAILURE)
            failure.error("interrupted by %s; resume with --resume %s", signum.name, roll_id)

    return run_until_signal(
        _run(args.command, options, RetryStats(), roll_id), interrupted=interrupted
    )
