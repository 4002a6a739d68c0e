"""A roll (or a plan) wired from its options, for whoever runs it: the command line
(`cli/roll.py`) or a controller (`rollguard.roller.controller`). `opened` builds what every roll
and plan needs (the agents' client, the platform, the journal's store and the lease, Kafka, the
events, the canary, the gates, the metrics) and closes it all at the end, whatever the outcome;
`Session.start` checks what a roll checks before its first call (the metrics address, the
Role's permissions), lists the nodes and reads their desired configurations (a bad one is a
ConfigError, exit 2, before Kafka is asked anything); `Session.roller` reads what the roll's
rules need (history, the target version, a resumed roll's target, what Kafka says each node
runs) and gives the `Roller`.

Where things are kept: files in --state-dir for an inventory; a ConfigMap and a
coordination.k8s.io Lease on Kubernetes. `plan` writes nothing: no events, no journal, no lease.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.model import Node
from rollguard.roller.platform import Platform
from rollguard.roller.roll.canary.watch import RollCanary
from rollguard.roller.roll.cli import expectations
from rollguard.roller.roll.cli.configuring import Configs, Desired, compare, read_desired
from rollguard.roller.roll.cli.gates import close_gates, gates_from, roll_canary
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.roller.roll.gates.keeper import Gate, Gates
from rollguard.roller.roll.gates.pause import PauseGate
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
from rollguard.roller.roll.voice import EventLog, Progress
from rollguard.shared.converters import HostPort
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryStats

if TYPE_CHECKING:
    from rollguard.roller.kubernetes_access import Credentials
    from rollguard.roller.roll.metrics import RollMetrics
    from rollguard.roller.roll.metrics_server import MetricsServer

__all__ = ["Session", "check_state_dir", "opened"]


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


@dataclass
class Session:
    command: str  # roll or plan
    roll_id: str
    options: RollOptions
    agents: AgentClient
    platform: Platform
    journal: JournalStore
    lease: Lease
    kafka: KafkaObserver
    events: EventLog
    canary: RollCanary | None
    gates: Gates
    lease_name: str = KUBERNETES_LEASE  # on Kubernetes (a controller's: one per cluster)
    cluster: str = ""  # its name in events, metrics and expectations ("": none known)
    credentials: Credentials | None = None  # whose RBAC a refusal names (None: the roller's)
    metrics: RollMetrics | None = None
    server: MetricsServer | None = None
    nodes: list[Node] = field(default_factory=list)
    history: expectations.History | None = None
    desired: Desired | None = None
    configs: Configs | None = None

    async def start(self) -> HostPort | None:
        """Before the first call: the metrics address taken (one in use is exit 2 before
        anything is done: its address is returned), the Role's permissions checked, the nodes
        listed."""
        address = None
        if self.server is not None and self.options.metrics_listen is not None:
            address = await self.server.start(self.options.metrics_listen)
        await _check_access(
            self.options,
            self.platform,
            self.command,
            self.roll_id,
            self.lease_name,
            self.credentials,
        )
        self.nodes = await self.platform.nodes()
        if self.canary is not None:  # which partitions are whose, to lead them again
            self.canary.node_ids = {n.name: n.node_id for n in self.nodes}
        # Each node's desired configuration (an inventory's config/config-command, or with
        # --compare-config the pods' ConfigMaps), read before Kafka is asked anything: a bad
        # one is exit 2, nothing asked, nothing done.
        self.desired = await read_desired(self.options, self.platform, self.nodes)
        return address

    async def roller(self, on_progress: Progress | None = None) -> Roller:
        """The roll, its settings read from what its rules need (see the module)."""
        options, settings = self.options, self.options.settings()
        cluster = self.cluster or None
        # --expectations: each node's recovery budget from its history, when it has one.
        if options.expectations is not None:
            self.history = expectations.history_for(
                options.expectations, cluster, self.nodes, options.max_recovery_wait
            )
            budgets = self.history.budgets.items()
            settings = replace(
                settings, recovery_budgets={n: b.seconds for n, b in budgets if b.from_history}
            )
        if settings.kafka_version is not None:  # before anything: can it run this cluster?
            await _check_target(self.kafka, settings.kafka_version)
        if options.resume is not None:  # a resumed upgrade goes on to its journal's version
            record = await asyncio.to_thread(self.journal.load, self.roll_id)
            if record is not None:
                settings = replace(
                    settings, kafka_version=resumed_target(record, settings.kafka_version)
                )
        # The desired configurations (`start`) against what Kafka says each node runs.
        self.configs = await compare(self.desired, self.nodes, self.kafka)
        roller = Roller(
            self.platform,
            self.kafka.observe,
            self.agents,
            self.journal,
            self.events,
            settings=settings,
            policy=options.retry_policy(),
            lease=None if self.command == "plan" else self.lease,
            on_progress=on_progress,
            elect_leaders=self.kafka.elect_preferred,
            gates=self.gates,
            configs=self.configs.live(self.nodes) if self.configs is not None else None,
        )
        if self.metrics is not None:
            self.metrics.follow([n.name for n in self.nodes], roller.recovery_budget)
        return roller


@asynccontextmanager
async def opened(
    command: str,
    options: RollOptions,
    stats: RetryStats,
    roll_id: str,
    *,
    lease_name: str = KUBERNETES_LEASE,
    gates: tuple[Gate, ...] = (),
    cluster: str | None = None,
    credentials: Credentials | None = None,
) -> AsyncIterator[Session]:
    """A roll's (or a plan's) pieces, built from its options and closed when it ends. A
    controller gives each cluster's roll a Lease of its own (`lease_name`, on Kubernetes),
    gates of its own (`gates`: a hold annotation), beside the options' and the pause's, and
    the cluster's name (`cluster`; by default the options', guessed as they say), and whose
    RBAC a refusal names (`credentials`: the chart's Role, say)."""
    folder = options.state_dir
    with ExitStack() as stack:
        agents = options.agent_client(stats)
        platform, journal, lease = _platform(
            options, agents, stack, roll_id, plan=command == "plan", lease_name=lease_name
        )
        kafka = KafkaObserver.from_file(options.bootstrap, options.kafka_properties)
        stack.callback(kafka.close)
        cluster = options.cluster_name() if cluster is None else cluster
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
        paused = () if command == "plan" else (PauseGate(lease, roll_id), *gates)
        kept = gates_from(options, kafka.consumer_lag, extra=paused, canary=canary)
        session = Session(
            command,
            roll_id,
            options,
            agents,
            platform,
            journal,
            lease,
            kafka,
            events,
            canary,
            kept,
            lease_name,
            cluster,
            credentials,
        )
        # --metrics-listen (a roll's, never a plan's): fed by its events, journal and lease.
        if command == "roll" and options.metrics_listen is not None:
            # prometheus_client only here: a roll without metrics does not pay its import.
            from rollguard.roller.roll.metrics import RollMetrics
            from rollguard.roller.roll.metrics_server import MetricsServer

            session.metrics = RollMetrics(roll_id, cluster or None)
            session.journal, session.lease = session.metrics.watch(events, journal, lease)
            session.server = MetricsServer(session.metrics.render)
        try:
            yield session
        finally:
            if session.server is not None:  # the roll is over (done, failed or interrupted)
                await session.server.stop()
            await agents.aclose()
            await platform.close()
            await close_gates(kept)


def _platform(
    options: RollOptions,
    agents: AgentClient,
    stack: ExitStack,
    roll_id: str,
    *,
    plan: bool,
    lease_name: str = KUBERNETES_LEASE,
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
        lease_name,
        holder=default_holder(),
        roll_id=roll_id,
    )
    return platform, ConfigMapJournalStore(sync_client, namespace), lease


async def _check_access(
    options: RollOptions,
    platform: Platform,
    command: str,
    roll_id: str,
    lease: str,
    credentials: Credentials | None,
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
            lease=lease,
            resume=options.resume is not None,
            configs=options.compare_config,
        )
    )
    await check_access(platform.client, platform.settings.namespace, needed, credentials)


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
