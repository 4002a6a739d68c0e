"""`rollguard`: the roller's command line.

    rollguard roll  (--inventory FILE | --namespace NS --selector SEL) --bootstrap HOST:PORT ...
    rollguard plan  (same flags): the same observation and decisions, printed; nothing restarted
    rollguard state URL...: ask agents for their broker's state once, like curl
    rollguard collect (--inventory FILE | --namespace NS --selector SEL) --out DIR: pull the
        agents' recovery timelines (and roller event journals) into a dataset for the report
    rollguard connect ... / rollguard mm2 ...: Kafka Connect operations
    (rollguard.roller.connect_cli)

Every flag can also be set as `ROLLGUARD_<FLAG>`. Exit codes: `roll` 0 rolled, 1 the roll
failed (the reason names the node and the cause), 2 bad flags, variables or files,
3 interrupted (resume with --resume ROLL_ID); `state` 0 every agent reported, 1 some did not;
`collect` 0 every agent caught up, 1 some did not (what the others sent is kept), 2 bad flags.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import logging
import os
import secrets
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rollguard.roller import connect_cli
from rollguard.roller.agent_client import AgentAnswer, AgentClient, AgentReport, broker_state_url
from rollguard.roller.display import LiveTable, on_terminal
from rollguard.roller.journal import EventLog, FileJournalStore, JournalStore
from rollguard.roller.kafka_admin import KafkaObserver, read_client_properties
from rollguard.roller.lease import (
    KUBERNETES_LEASE,
    LEASE_FILE,
    FileLease,
    KubernetesLease,
    Lease,
    default_holder,
)
from rollguard.roller.model import Node, check_cluster
from rollguard.roller.platform import InventoryPlatform, Platform, load_inventory
from rollguard.roller.progress import RecoveryTracker
from rollguard.roller.roll import OnAgentUnreachable, Roller, RollSettings
from rollguard.shared.cli import ExitCode, Parser
from rollguard.shared.errors import ConfigError, RollguardError
from rollguard.shared.retry import RETRY_SETTINGS, RetryPolicy, RetryStats, policy_from_settings
from rollguard.shared.settings import (
    Flag,
    add_flags,
    boolean,
    choice,
    duration_between,
    integer,
    milliseconds_to_duration,
    resolve,
    retry_flags,
    servers,
)
from rollguard.shared.tls import client_context

logger = logging.getLogger("rollguard")

ENV_PREFIX = "ROLLGUARD_"
EXIT_FAILED = ExitCode.FAILED
EXIT_CONFIG = ExitCode.USAGE
EXIT_INTERRUPTED = ExitCode.INTERRUPTED


def _names(text: str) -> frozenset[str]:
    return frozenset(filter(None, (n.strip() for n in text.split(","))))


def _roll_id(text: str) -> str:
    if not (text.isascii() and text.replace("-", "").isalnum()) or len(text) > 40:
        raise ValueError(f"{text!r}: a roll id is letters, digits and dashes, 40 at most")
    return text.lower()


def _on_agent_unreachable(text: str) -> OnAgentUnreachable:
    return OnAgentUnreachable(choice(*(o.value for o in OnAgentUnreachable))(text))


STATE_DIR = Flag(
    "state-dir", ".rollguard", Path, "folder of roll journals and event journals", "DIR"
)


def _check_state_dir(folder: Path) -> None:
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


AGENT_FLAGS = (
    Flag("cert", None, Path, "client certificate (PEM) presented to agents", "PATH", True),
    Flag("key", None, Path, "its unencrypted PEM private key", "PATH", True),
    Flag("cacert", None, Path, "CA bundle (PEM) that agents' certificates chain to", "PATH", True),
    Flag(
        "timeout",
        "5s",
        duration_between("10ms", "1h"),
        "time for one request to an agent",
        "DURATION",
    ),
    *retry_flags(),
)
OUTPUT = Flag(
    "output", "text", choice("text", "json"), "text, or json (one object a line)", "FORMAT"
)
STATE_FLAGS = (*AGENT_FLAGS, OUTPUT)
PLATFORM_FLAGS = (
    Flag("inventory", None, Path, "YAML inventory of nodes (VMs, bare metal)", "FILE"),
    Flag("namespace", None, str, "Kubernetes namespace of the broker pods", "NS"),
    Flag("selector", None, str, "label selector of the broker pods", "SELECTOR"),
    Flag(
        "agent-url",
        "https://{pod}.{service}.{namespace}.svc:8443",
        str,
        "agent URL template on Kubernetes",
        "TEMPLATE",
    ),
    Flag("service", "", str, "headless service of the broker pods, for --agent-url", "NAME"),
    Flag(
        "broker-role-label",
        "strimzi.io/broker-role",
        str,
        'pod label that is "true" on brokers',
        "LABEL",
    ),
    Flag(
        "controller-role-label",
        "strimzi.io/controller-role",
        str,
        'pod label that is "true" on KRaft controllers',
        "LABEL",
    ),
    Flag(
        "node-id-label", None, str, "pod label holding the node id (default: name suffix)", "LABEL"
    ),
)
ROLL_FLAGS = (
    *AGENT_FLAGS,
    OUTPUT,
    *PLATFORM_FLAGS,
    Flag(
        "bootstrap",
        None,
        servers,
        "Kafka bootstrap servers HOST:PORT[,...] for the Admin API",
        "SERVERS",
        True,
    ),
    Flag("kafka-properties", None, Path, "Kafka client properties file (TLS, SASL)", "FILE"),
    Flag(
        "operation-timeout",
        "5m",
        duration_between("10ms", "7d"),
        "how long a node may take to become ready before its agent decides",
        "DURATION",
        deprecated=(("operation-timeout-ms", milliseconds_to_duration),),
    ),
    Flag(
        "poll-interval",
        "2s",
        duration_between("10ms", "1h"),
        "time between readiness, safety and agent checks",
        "DURATION",
    ),
    Flag(
        "max-recovery-wait",
        "6h",
        duration_between("10ms", "30d"),
        "longest wait for a broker in log recovery that makes progress",
        "DURATION",
    ),
    Flag(
        "stall-timeout",
        "10m",
        duration_between("10ms", "7d"),
        "a recovery with no progress for this long is stalled",
        "DURATION",
    ),
    Flag(
        "restart-timeout",
        "5m",
        duration_between("10ms", "1d"),
        "time limit of an inventory restart command",
        "DURATION",
    ),
    Flag(
        "safety-wait",
        "30m",
        duration_between("10ms", "30d"),
        "how long a roll waits without progress for a restart to become safe and for a "
        "restarted broker to rejoin its ISRs",
        "DURATION",
    ),
    Flag(
        "on-agent-unreachable",
        "wait",
        _on_agent_unreachable,
        "a node whose agent cannot answer: wait (within --safety-wait) or force (restart it "
        "after --operation-timeout)",
        "wait|force",
    ),
    Flag(
        "max-clock-skew",
        "30s",
        duration_between("10ms", "1d"),
        "largest clock difference between the roller and an agent before anything is done",
        "DURATION",
    ),
    Flag("only", "", _names, "restart only these nodes (comma-separated names)", "NODES"),
    Flag("skip", "", _names, "never restart these nodes (comma-separated names)", "NODES"),
    Flag(
        "all",
        "false",
        boolean,
        "on Kubernetes, restart pods that are already up to date too (a switch)",
        switch=True,
    ),
    Flag("roll-id", None, _roll_id, "id of a new roll (default: time and random)", "ID"),
    Flag("resume", None, _roll_id, "resume the roll with this id", "ID"),
    STATE_DIR,
)


def _paths(text: str) -> list[Path]:
    return [Path(p.strip()) for p in text.split(",") if p.strip()]


COLLECT_FLAGS = (
    *AGENT_FLAGS,
    OUTPUT,
    *PLATFORM_FLAGS,
    Flag(
        "out", None, Path, "dataset folder (created; collect again into the same one)", "DIR", True
    ),
    Flag(
        "cluster",
        None,
        check_cluster,
        "cluster name in the dataset (default: the inventory file's stem, or the selector's "
        "strimzi.io/cluster, or the namespace)",
        "NAME",
    ),
    Flag("events", "", _paths, "roller event journals: files or --state-dir folders", "PATHS"),
    Flag("concurrency", "16", integer(1, 1024), "agents pulled at once", "N"),
    Flag("page-size", "5000", integer(1, 10000), "records per request", "N"),
    Flag(
        "agent-deadline",
        "2m",
        duration_between("10ms", "1d"),
        "time one agent may take in a run; what came by then is kept",
        "DURATION",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rollguard", description="Rolls Kafka clusters safely.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    state = sub.add_parser("state", help="ask agents for their broker's state once")
    state.add_argument(
        "urls", nargs="+", metavar="URL", help="agent URL, e.g. https://kafka-0.kafka.prod.svc:8443"
    )
    add_flags(state, STATE_FLAGS, ENV_PREFIX)
    for name, text in (
        ("roll", "roll the cluster, never restarting a broker in recovery"),
        ("plan", "print what a roll would do now; restart nothing"),
    ):
        add_flags(sub.add_parser(name, help=text), ROLL_FLAGS, ENV_PREFIX)
    collect = sub.add_parser("collect", help="pull agents' recovery timelines into a dataset")
    add_flags(collect, COLLECT_FLAGS, ENV_PREFIX)
    connect_cli.add_parsers(sub, Parser)
    return parser


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


def agent_client(values: dict[str, Any], stats: RetryStats) -> AgentClient:
    policy = retry_policy(values)
    tls = client_context(values["cacert"], values["cert"], values["key"])
    return AgentClient(tls, policy, stats=stats, timeout=values["timeout"])


def retry_policy(values: dict[str, Any]) -> RetryPolicy:
    return policy_from_settings({s.name: values[s.name] for s in RETRY_SETTINGS})


async def query(urls: Sequence[str], client: AgentClient) -> list[AgentAnswer]:
    async with client:
        return list(await asyncio.gather(*(client.broker_state(url) for url in urls)))


def state(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    values = resolve(args, environ, STATE_FLAGS, ENV_PREFIX)
    retry_policy(values)
    urls = []
    for url in args.urls:
        try:
            urls.append(broker_state_url(url))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    stats = RetryStats()
    answers = asyncio.run(query(urls, agent_client(values, stats)))
    width = max(len(a.url) for a in answers)
    for answer in answers:
        if values["output"] == "json":
            print(json.dumps(as_json(answer)))
        else:
            print(f"{answer.url:<{width}}  {describe(answer)}")
    reported = sum(isinstance(a, AgentReport) for a in answers)
    print(
        f"{len(answers)} agents: {reported} reported, {len(answers) - reported} unavailable; "
        f"{stats.summary()}",
        file=sys.stderr,
    )
    return 0 if reported == len(answers) else EXIT_FAILED


# ---- collect ----------------------------------------------------------------------------


def _cluster_name(values: dict[str, Any]) -> str:
    if values["cluster"] is not None:
        return str(values["cluster"])
    if values["inventory"] is not None:
        name = Path(values["inventory"]).stem
    else:
        terms = dict(t.split("=", 1) for t in (values["selector"] or "").split(",") if "=" in t)
        name = terms.get("strimzi.io/cluster", values["namespace"] or "")
    try:
        return check_cluster(name.strip())
    except ValueError as exc:
        raise ConfigError(f"{exc}; name the cluster with --cluster") from None


async def _collect(values: dict[str, Any], stats: RetryStats) -> int:
    from rollguard.roller.collect import Dataset, collect
    from rollguard.roller.collect import describe as describe_pull

    with ExitStack() as stack:
        agents = agent_client(values, stats)
        platform, _ = _nodes_from(values, agents, stack)
        try:
            nodes = await platform.nodes()
            dataset = Dataset(values["out"], _cluster_name(values))
            result = await collect(
                agents,
                nodes,
                dataset,
                events=values["events"],
                concurrency=values["concurrency"],
                page_size=values["page-size"],
                deadline=values["agent-deadline"],
            )
        finally:
            await agents.aclose()
            await platform.close()
    for node in result.nodes:
        if values["output"] == "json":
            print(json.dumps({**asdict(node), "expired": [list(e) for e in node.expired]}))
        else:
            print(f"{node.node:<24} {describe_pull(node)}")
    for line in result.events.malformed:
        print(f"rollguard: malformed event skipped: {line}", file=sys.stderr)
    records = sum(n.records for n in result.nodes)
    gaps = sum(len(n.expired) for n in result.nodes)
    print(
        f"collected {records} records from {len(result.nodes)} agents "
        f"({len(result.failed)} not caught up: {', '.join(n.node for n in result.failed) or '-'}; "
        f"{gaps} gaps), {result.events.events} roller events from {result.events.files} files, "
        f"into {dataset.root} cluster {dataset.cluster} in {result.seconds:.1f}s; "
        f"{stats.summary()}",
        file=sys.stderr,
    )
    return EXIT_FAILED if result.failed else 0


def collect_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    values = resolve(args, environ, COLLECT_FLAGS, ENV_PREFIX)
    retry_policy(values)
    if importlib.util.find_spec("pyarrow") is None:
        raise ConfigError(
            "rollguard collect writes Parquet with pyarrow, which is not installed: "
            "pip install 'rollguard[collect]'"
        )
    return asyncio.run(_collect(values, RetryStats()))


# ---- roll and plan ----------------------------------------------------------------------


def _platform(
    values: dict[str, Any], agents: AgentClient, stack: ExitStack, roll_id: str
) -> tuple[Platform, JournalStore, Lease]:
    """The platform, the roll journal's store and the cluster's lease: files in --state-dir for
    an inventory, a ConfigMap and a coordination.k8s.io Lease on Kubernetes."""
    folder: Path = values["state-dir"]
    platform, sync_client = _nodes_from(values, agents, stack, folder, roll_id)
    if sync_client is None:
        lease: Lease = FileLease(folder / LEASE_FILE, holder=default_holder(), roll_id=roll_id)
        return platform, FileJournalStore(folder), lease
    from rollguard.roller.kubernetes import ConfigMapJournalStore, KubernetesPlatform

    assert isinstance(platform, KubernetesPlatform)
    lease = KubernetesLease(
        platform.client,
        values["namespace"],
        KUBERNETES_LEASE,
        holder=default_holder(),
        roll_id=roll_id,
    )
    return platform, ConfigMapJournalStore(sync_client, values["namespace"]), lease


def _nodes_from(
    values: dict[str, Any],
    agents: AgentClient,
    stack: ExitStack,
    folder: Path | None = None,
    roll_id: str = "",
) -> tuple[Platform, Any]:
    """The platform of --inventory or --namespace/--selector (and, on Kubernetes, a synchronous
    client for the journal store)."""
    inventory, namespace = values["inventory"], values["namespace"]
    if (inventory is None) == (namespace is None):
        raise ConfigError("give either --inventory FILE or --namespace NS with --selector")
    if inventory is not None:
        platform = InventoryPlatform(
            load_inventory(inventory),
            agents,
            restart_timeout=values.get("restart-timeout", 300),
            folder=folder,
            roll_id=roll_id,
        )
        return platform, None
    if not values["selector"]:
        raise ConfigError("--namespace needs --selector (e.g. strimzi.io/cluster=my-cluster)")
    from lightkube import AsyncClient, Client
    from lightkube.core.exceptions import ConfigError as KubeConfigError

    from rollguard.roller.kubernetes import KubernetesPlatform, KubernetesSettings

    try:
        client = AsyncClient(namespace=namespace)
        sync_client = Client(namespace=namespace)
    except KubeConfigError as exc:
        raise ConfigError(f"Kubernetes: {exc}") from None
    stack.callback(sync_client.close)
    settings = KubernetesSettings(
        namespace,
        values["selector"],
        values["agent-url"],
        values["service"],
        values["node-id-label"],
        values["broker-role-label"],
        values["controller-role-label"],
    )
    return KubernetesPlatform(client, settings), sync_client


def _new_roll_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


async def _run(command: str, values: dict[str, Any], stats: RetryStats) -> int:
    roll_id = values["resume"] or values["roll-id"] or _new_roll_id()
    folder: Path = values["state-dir"]
    with ExitStack() as stack:
        agents = agent_client(values, stats)
        platform, journal, lease = _platform(values, agents, stack, roll_id)
        properties = {}
        if values["kafka-properties"] is not None:
            properties = read_client_properties(values["kafka-properties"])
        kafka = KafkaObserver(values["bootstrap"], properties)
        stack.callback(kafka.close)
        observer = kafka.observe
        settings = RollSettings(
            operation_timeout=values["operation-timeout"],
            poll_interval=values["poll-interval"],
            max_recovery_wait=values["max-recovery-wait"],
            stall_timeout=values["stall-timeout"],
            safety_wait=values["safety-wait"],
            on_agent_unreachable=values["on-agent-unreachable"],
            max_clock_skew=values["max-clock-skew"],
            only=values["only"],
            skip=values["skip"],
            all_nodes=values["all"],
        )
        # `plan` writes nothing: no events, no journal, no lease.
        events = EventLog(
            None if command == "plan" else folder / f"events-{roll_id}.jsonl", roll_id
        )
        try:
            nodes = await platform.nodes()
            display = LiveTable(nodes) if on_terminal() and values["output"] == "text" else None
            roller = Roller(
                platform,
                observer,
                agents,
                journal,
                events,
                settings=settings,
                policy=retry_policy(values),
                lease=None if command == "plan" else lease,
                on_progress=_progress(display, values["output"]),
            )
            if command == "plan":
                try:
                    entries = await roller.plan()
                except ConfigError:
                    raise
                except RollguardError as exc:
                    print(f"rollguard: plan failed: {exc}", file=sys.stderr)
                    return EXIT_FAILED
                for entry in entries:
                    if values["output"] == "json":
                        print(json.dumps(entry.to_json()))
                    else:
                        print(f"{entry.node.name:<24} {entry.text()}")
                return 0
            if display is not None:
                stack.enter_context(display)
            print(f"roll {roll_id}: journal and events in {folder}", file=sys.stderr)
            try:
                result = await roller.roll(roll_id, resume=values["resume"] is not None)
            except ConfigError:
                raise  # exit 2: nothing was restarted
            except RollguardError as exc:  # RollFailed, LeaseHeld, a platform's error...
                _finish(values, roll_id, "failed", str(exc), stats)
                return EXIT_FAILED
            _finish(
                values,
                roll_id,
                "completed",
                f"restarted {len(result.restarted)}, skipped {len(result.skipped)}",
                stats,
            )
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
    values: dict[str, Any], roll_id: str, outcome: str, detail: str, stats: RetryStats
) -> None:
    if values["output"] == "json":
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


def roll(command: str, args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    values = resolve(args, environ, ROLL_FLAGS, ENV_PREFIX)
    retry_policy(values)
    stats = RetryStats()
    loop = asyncio.new_event_loop()
    task = loop.create_task(_run(command, values, stats))
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        print("rollguard: interrupted; resume with --resume and the roll id above", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        loop.close()


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="rollguard: %(levelname)s %(message)s")
    # kafka-python logs every refused or reset connection, with a traceback, at ERROR; a roll
    # causes those on purpose. Its errors reach the roller as exceptions and are reported there.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    environ = os.environ if environ is None else environ
    try:
        if args.command == "state":
            return state(args, environ)
        if args.command == "collect":
            return collect_command(args, environ)
        if args.command in ("connect", "mm2"):
            return connect_cli.run(args, environ)
        _check_state_dir(resolve(args, environ, (STATE_DIR,), ENV_PREFIX)["state-dir"])
        return roll(args.command, args, environ)
    except ConfigError as exc:
        print(f"rollguard: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except RollguardError as exc:  # a platform's or a peer's error, translated at its boundary
        print(f"rollguard: {exc}", file=sys.stderr)
        return ExitCode.FAILED


if __name__ == "__main__":
    sys.exit(main())
