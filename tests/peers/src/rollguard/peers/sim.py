"""A simulated cluster on a virtual clock, for property tests and `bench/roll_sim.py`.

Nodes restart, start, recover, catch up and become ready on a virtual clock: no real sleeping.
The roller under test is the production `Roller` with its production `AgentClient` and the
production `InventoryPlatform`'s observation (readiness from the agent, identity from the
agent's `brokerStartedAt`); only the transport under httpx (a `MockTransport` answering from
the simulation, the seam httpx offers for this), the Admin API's answers and the restart itself
are simulated.

What a real cluster does after a restart, and the simulation too:
- the JVM starts a second after the restart (the agent answers `jmx-unreachable` before), a new
  `brokerStartedAt` each time; STARTING, then a log recovery if the restart brings one (the
  recovery gauges present, in STARTING as most of a real 4.x broker's recoveries run, or in
  RECOVERY when its registration was acknowledged first), then, after a recovery in STARTING,
  seconds more in STARTING without the gauges (catching up with the metadata log and
  registering: `registration_seconds`) before RUNNING;
- RUNNING is not in sync: the broker rejoins its partitions' ISRs one by one over its own
  catch-up time (a partition with no other replica has nothing to fetch and rejoins at once);
- a KRaft voter catches up with the leader within seconds of its JVM starting; until then its
  `lastCaughtUpTimestamp` stays at the moment it went down. A leader that goes down is replaced
  by the lowest caught-up voter;
- `__consumer_offsets` and `__transaction_state` (50 partitions each, RF 3, min ISR 2, marked
  internal) are placed over the brokers beside the random user partitions.

Every restart is checked as it happens, by the simulation's own rules and not the roller's:
restarting a broker in log recovery, or any node while another is in log recovery; taking a
partition that has more replicas than its min.insync.replicas below it; taking a partition that
has another replica offline (no replica in sync); leaving fewer other KRaft voters caught up than
a majority of all voters (with three or more; with two, the other one not caught up).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.model import (
    ClusterView,
    Node,
    PartitionInfo,
    PlatformView,
    QuorumInfo,
    Role,
    VoterInfo,
)
from rollguard.roller.platform import InventoryNode, InventoryPlatform
from rollguard.roller.roll.configs.live import LiveConfigs
from rollguard.roller.roll.roller import Roller
from rollguard.roller.roll.rules.settings import RollFailed, RollSettings
from rollguard.roller.roll.stores.journal import FileJournalStore
from rollguard.roller.roll.voice import EventLog
from rollguard.shared.retry import RetryPolicy
from rollguard.shared.states import BrokerState
from rollguard.shared.tls import trusting_nothing
from rollguard.shared.wire import format_time

# Virtual second 0 on the wall clock, for the times the agents and the quorum report.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
JVM_START_DELAY = 1.0  # from the restart to the new JVM answering JMX
FETCH_AGE = 0.2  # a caught-up follower's last fetch, behind the leader's clock


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)
        await asyncio.sleep(0)


def wall(moment: float) -> datetime:
    return EPOCH + timedelta(seconds=moment)


def wall_ms(moment: float) -> int:
    return int((EPOCH.timestamp() + moment) * 1000)


@dataclass(frozen=True, slots=True)
class SimPartition:
    topic: str
    index: int
    replicas: tuple[int, ...]
    min_isr: int
    internal: bool = False

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"


@dataclass
class SimNode:
    """One node's timeline since its last restart; every state is a function of the time."""

    node: Node
    restart_seconds: float = 60.0  # from the restart to the end of STARTING
    recovery_after_restart: float = 0.0  # seconds of log recovery the next restart brings
    catch_up_seconds: float = 0.0  # after RUNNING, until back in every ISR
    quorum_lag: float = 3.0  # a voter: from its JVM's start until caught up with the leader
    # After a recovery in STARTING: STARTING without the gauges this long before RUNNING (a real
    # broker catching up with the metadata log and registering; longer under load).
    registration_seconds: float = 5.0
    recovery_state: BrokerState = BrokerState.STARTING  # the state its recoveries run in
    # Its current run: restarted, JVM up, STARTING and RECOVERY until (a day before the roll
    # for a node that has been in sync all along).
    restarted_at: float = -86403.0
    jvm_started_at: float = -86402.0
    down_until: float = -86401.0
    recovery_until: float = -86400.0
    recovery_segments: int = 0
    # Partition (the cluster's index) -> when it rejoins, as a fraction of the catch-up time.
    rejoin: dict[int, float] = field(default_factory=dict)
    restarts: int = 0
    # The Kafka its agent reports once its server has started (after STARTING, as a real
    # node's app-info MBean); a restart with a target version brings it there, unless its
    # install is broken (`install_fails`: the package did not install, the old binaries run).
    kafka_version: str = "4.4.0"
    install_fails: bool = False
    _times: dict[int, float] = field(default_factory=dict, repr=False, compare=False)
    _times_key: tuple[float, float, int, int] | None = field(
        default=None, repr=False, compare=False
    )

    def up(self, t: float) -> bool:
        return t >= self.jvm_started_at

    def state(self, t: float) -> BrokerState | None:
        """The BrokerState its agent reads; None while no JVM answers."""
        if not self.up(t):
            return None
        if t < self.down_until:
            return BrokerState.STARTING
        if t < self.recovery_until:
            return self.recovery_state
        if t < self.running_at:
            return BrokerState.STARTING
        return BrokerState.RUNNING

    def recovering(self, t: float) -> bool:
        """In log recovery: its agent reports the recovery gauges."""
        return self.up(t) and self.down_until <= t < self.recovery_until

    @property
    def running_at(self) -> float:
        if self.recovery_until <= self.down_until:
            return self.down_until
        registering = self.registration_seconds
        if self.recovery_state is not BrokerState.STARTING:
            registering = 0.0  # registered before its recovery: RUNNING once it ends
        return self.recovery_until + registering

    def rejoins_at(self, partition: int) -> float:
        fraction = self.rejoin[partition]
        return self.running_at + (self.catch_up_seconds * fraction if fraction else 0.0)

    def rejoin_times(self) -> dict[int, float]:
        """`rejoins_at` for every partition it hosts, kept until the run or the plan changes."""
        key = (self.running_at, self.catch_up_seconds, id(self.rejoin), len(self.rejoin))
        if self._times_key != key:
            self._times = {p: self.rejoins_at(p) for p in self.rejoin}
            self._times_key = key
        return self._times

    def in_sync(self, partition: int, t: float) -> bool:
        return self.state(t) is BrokerState.RUNNING and t >= self.rejoin_times()[partition]

    def caught_up(self, t: float) -> bool:
        """As a KRaft voter: its JVM is up and has fetched the metadata log it missed."""
        return self.up(t) and t >= self.jvm_started_at + self.quorum_lag

    def ready(self, t: float) -> bool:
        if not self.node.is_broker:
            return self.caught_up(t)
        return self.state(t) is BrokerState.RUNNING

    def synced_at(self) -> float:
        """When the current run is back in every ISR (a broker) and caught up (a voter)."""
        moments = [self.jvm_started_at + self.quorum_lag] if self.node.is_controller else []
        if self.node.is_broker:
            moments += [self.running_at, *self.rejoin_times().values()]
        return max(moments)

    def back_at(self, was_in: set[int], voter_was_caught_up: bool) -> float:
        """When the current run is back where the node stood before its restart: running, in
        the ISRs it was in (`was_in`), caught up with the quorum if it was (`synced_at` of
        what the restart took away; the roller waits for exactly that)."""
        moments = [self.jvm_started_at + self.quorum_lag] if self.node.is_controller else []
        if not voter_was_caught_up:
            moments = []
        if self.node.is_broker:
            times = self.rejoin_times()
            moments += [self.running_at, *(times[i] for i in was_in)]
        return max(moments, default=self.jvm_started_at)

    def events(self) -> list[float]:
        """Every moment of the current run at which its state changes."""
        moments = [self.jvm_started_at, self.down_until, self.recovery_until, self.running_at]
        moments += self.rejoin_times().values()
        if self.node.is_controller:
            moments.append(self.jvm_started_at + self.quorum_lag)
        return moments

    def remaining(self, t: float) -> tuple[int, int]:
        total = self.recovery_until - self.down_until
        left = max(0.0, 1 - (t - self.down_until) / total) if total > 0 else 0.0
        segments = math.ceil(self.recovery_segments * left)
        return (max(1, segments // 20) if segments else 0), segments


@dataclass
class Violations:
    restarted_recovering: list[str] = field(default_factory=list)
    # restarted while another node was in log recovery
    beside_recovery: list[str] = field(default_factory=list)
    below_min_isr: list[str] = field(default_factory=list)
    offline: list[str] = field(default_factory=list)
    quorum_lost: list[str] = field(default_factory=list)

    def count(self) -> int:
        found = (
            self.restarted_recovering,
            self.beside_recovery,
            self.below_min_isr,
            self.offline,
            self.quorum_lost,
        )
        return sum(map(len, found))


@dataclass(frozen=True, slots=True)
class RestartEntry:
    """One restart. `earliest`: from the moment the node restarted before it was back in sync
    (0 for the first), the first moment some node not yet restarted could have been restarted
    without a violation; `synced_at`: when this restart's node is back where it was before it
    (in the ISRs it was in, caught up if it was: what the roller waits for). Between
    `earliest` and `at` the roller was slower than the cluster; before `earliest` the cluster
    itself was not ready."""

    name: str
    at: float
    earliest: float
    synced_at: float
    own: float  # restart + recovery + catch-up of this restart


class SimCluster:
    def __init__(
        self,
        nodes: list[SimNode],
        partitions: list[SimPartition],
        clock: VirtualClock,
        racks: dict[int, str] | None = None,
    ) -> None:
        self.racks = dict(racks or {})  # broker.rack, as DescribeCluster reports it
        self.nodes = {n.node.name: n for n in nodes}
        self.by_id = {n.node.node_id: n for n in nodes}
        self.partitions = partitions
        self.clock = clock
        self.violations = Violations()
        # `RestartEntry.earliest` searches every moment for a possible restart: the serial
        # benchmark's overhead split needs it, the batch benchmark (1,000 brokers) does not.
        self.track_earliest = True
        self.leader: int | None = None
        self.log: list[RestartEntry] = []
        self._isrs: list[tuple[int, ...]] = []
        self._parts: tuple[PartitionInfo, ...] = ()
        self.hosted: dict[int, list[int]] = {i: [] for i in self.by_id}
        for index, p in enumerate(partitions):
            for r in p.replicas:
                self.hosted[r].append(index)

    @property
    def voters(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.node.is_controller]

    def isr(self, index: int, t: float) -> tuple[int, ...]:
        return tuple(r for r in self.partitions[index].replicas if self.by_id[r].in_sync(index, t))

    def isrs(self, t: float) -> list[tuple[int, ...]]:
        """Every partition's ISR at `t` (`isr` for all at once: the Admin API's hot path)."""
        times = {
            i: n.rejoin_times() for i, n in self.by_id.items() if n.state(t) is BrokerState.RUNNING
        }
        return [
            tuple(r for r in p.replicas if r in times and t >= times[r][index])
            for index, p in enumerate(self.partitions)
        ]

    def harms(self, sim: SimNode, t: float) -> Violations:
        """What restarting `sim` at `t` would do, by the simulation's rules (not the roller's)."""
        found = Violations()
        name, node_id = sim.node.name, sim.node.node_id
        if sim.recovering(t):
            found.restarted_recovering.append(f"{name}@{t:.0f}")
        others = [n.node.name for n in self.nodes.values() if n is not sim and n.recovering(t)]
        if others:
            found.beside_recovery.append(f"{name}@{t:.0f} while {', '.join(others)} recovered")
        below, offline = [], []
        for index in self.hosted[node_id]:
            p = self.partitions[index]
            isr = self.isr(index, t)
            if node_id not in isr:
                continue  # its restart does not shrink this ISR
            if len(p.replicas) > p.min_isr and len(isr) - 1 < p.min_isr:
                below.append(f"{p.name} isr {list(isr)}")
            elif len(isr) == 1 and len(p.replicas) > 1:
                offline.append(f"{p.name} isr {list(isr)}")
        # One entry per restart, naming every partition it harms.
        if below:
            found.below_min_isr.append(f"{name}@{t:.0f}: {', '.join(below)}")
        if offline:
            found.offline.append(f"{name}@{t:.0f}: {', '.join(offline)}")
        voters = self.voters
        if sim.node.is_controller and len(voters) > 1:
            caught = sum(1 for v in voters if v is not sim and v.caught_up(t))
            needed = len(voters) // 2 + 1 if len(voters) >= 3 else 1
            if caught < needed:
                found.quorum_lost.append(f"{name}@{t:.0f} {caught} of {len(voters)} caught up")
        return found

    def restartable(self, sim: SimNode, t: float) -> bool:
        return sim.ready(t) and self.harms(sim, t).count() == 0

    def earliest(self, since: float, until: float) -> float:
        """The first moment in [since, until] at which a node not yet restarted could have
        been; states change only at the nodes' events, so only those moments are tried."""
        pending = [n for n in self.nodes.values() if n.restarts == 0]
        moments = sorted({since} | {m for n in self.nodes.values() for m in n.events()})
        for moment in (m for m in moments if since <= m <= until):
            if any(self.restartable(sim, moment) for sim in pending):
                return moment
        return until

    def restart_now(self, name: str, kafka_version: str | None = None) -> None:
        sim = self.nodes[name]
        if kafka_version is not None and not sim.install_fails:
            sim.kafka_version = kafka_version
        now = self.clock.now
        previous = self.log[-1].synced_at if self.log else 0.0
        earliest = self.earliest(min(previous, now), now) if self.track_earliest else now
        found = self.harms(sim, now)
        for mine, theirs in (
            (self.violations.restarted_recovering, found.restarted_recovering),
            (self.violations.beside_recovery, found.beside_recovery),
            (self.violations.below_min_isr, found.below_min_isr),
            (self.violations.offline, found.offline),
            (self.violations.quorum_lost, found.quorum_lost),
        ):
            mine += theirs
        sim.restarts += 1
        was_in = {i for i in sim.rejoin if sim.in_sync(i, now)} if sim.node.is_broker else set()
        voter_was_caught_up = sim.caught_up(now) if sim.node.is_controller else True
        if any(fraction > 1 for fraction in sim.rejoin.values()):
            # A lagging follower (`rack_cluster`'s `lagging`) catches up after its restart.
            sim.rejoin = {index: min(f, 1.0) for index, f in sim.rejoin.items()}
        sim.restarted_at = now
        sim.jvm_started_at = now + JVM_START_DELAY
        sim.down_until = now + sim.restart_seconds
        sim.recovery_until = sim.down_until + sim.recovery_after_restart
        sim.recovery_segments = int(sim.recovery_after_restart * 10)
        synced = sim.back_at(was_in, voter_was_caught_up)
        self.log.append(RestartEntry(name, now, earliest, synced, synced - now))

    # the Admin API ---------------------------------------------------------------------------
    def cluster_view(self) -> ClusterView:
        now = self.clock.now
        isrs = self.isrs(now)
        if isrs != self._isrs:  # the same ISRs: the same (frozen) partitions as last time
            self._isrs = isrs
            self._parts = tuple(
                PartitionInfo(p.topic, p.index, p.replicas, isr, p.min_isr, p.internal)
                for p, isr in zip(self.partitions, isrs, strict=True)
            )
        parts = self._parts
        caught = sorted(v.node.node_id for v in self.voters if v.caught_up(now))
        if self.leader not in caught:
            self.leader = caught[0] if caught else None
        racks = tuple(sorted(self.racks.items()))
        if self.leader is None:
            return ClusterView(parts, None, None, racks=racks)

        def last_caught_up(v: SimNode) -> int:
            if v.node.node_id == self.leader:
                return wall_ms(now)
            if v.caught_up(now):
                return wall_ms(now - FETCH_AGE)
            return wall_ms(v.restarted_at)  # its old process, the last time it fetched

        voters = tuple(VoterInfo(v.node.node_id, last_caught_up(v)) for v in self.voters)
        return ClusterView(parts, QuorumInfo(self.leader, voters), self.leader, racks=racks)

    # the agents, over httpx ------------------------------------------------------------------
    def handle(self, request: httpx.Request) -> httpx.Response:
        sim = self.nodes[str(request.url.host)]
        now = self.clock.now
        state = sim.state(now)
        if state is None:
            return httpx.Response(503, json={"error": "jmx-unreachable", "message": "down"})
        started = {"kafkaVersion": sim.kafka_version} if state is BrokerState.RUNNING else {}
        if not sim.node.is_broker:
            missing = {"error": "broker-state-missing", "message": "a controller-only node"}
            return httpx.Response(503, json={**missing, **started})
        body: dict[str, object] = {
            "brokerState": int(state),
            "sampledAt": format_time(wall(now)),
            "brokerStartedAt": format_time(wall(sim.jvm_started_at)),
            "agentBootId": f"sim-{sim.node.name}",
            **started,
        }
        if sim.recovering(now):
            logs, segments = sim.remaining(now)
            body["recovery"] = {
                "remainingLogsToRecover": logs,
                "remainingSegmentsToRecover": segments,
            }
        return httpx.Response(200, content=json.dumps(body).encode())


class SimPlatform:
    """The inventory platform as production observes it (its agent: readiness, and identity
    from `brokerStartedAt`), with the restart carried out by the simulation, not a command."""

    revisions = False  # as an inventory's: every node is out of date

    def __init__(self, cluster: SimCluster, agents: AgentClient, folder: Path) -> None:
        self.cluster = cluster
        clock = cluster.clock
        self._inventory = InventoryPlatform(
            [InventoryNode(n.node, "simulated") for n in cluster.nodes.values()],
            agents,
            folder=folder,
            roll_id="sim",
            clock=lambda: EPOCH.timestamp() + clock.now,
        )

    async def nodes(self) -> list[Node]:
        return await self._inventory.nodes()

    async def observe(self, node: Node) -> PlatformView:
        return await self._inventory.observe(node)

    async def restart(self, node: Node, *, kafka_version: str | None = None) -> None:
        self.cluster.restart_now(node.name, kafka_version)

    async def restart_pending(self, node: Node) -> bool:
        return False  # a simulated restart is over when `restart` returns

    async def close(self) -> None:
        pass


def internal_topics(rng: random.Random, brokers: list[int]) -> list[SimPartition]:
    """Kafka's own topics, placed as Kafka places replicas: consecutive brokers from a random
    start, shifted by one per partition."""
    parts = []
    replication = min(3, len(brokers))
    for topic in ("__consumer_offsets", "__transaction_state"):
        start = rng.randrange(len(brokers))
        for index in range(50):
            first = start + index
            replicas = tuple(brokers[(first + k) % len(brokers)] for k in range(replication))
            parts.append(SimPartition(topic, index, replicas, 2, internal=True))
    return parts


def recoveries(
    sim: SimNode, rng: random.Random, at_start: float, on_restart: float, most: float
) -> SimNode:
    """`sim` in log recovery when the roll starts (at `at_start`'s odds), and brought into one
    by its restart (at `on_restart`'s), each of 60 s to `most`."""
    if rng.random() < at_start:
        sim.restarted_at, sim.jvm_started_at, sim.down_until = -61.0, -60.0, 0.0
        sim.recovery_until = rng.uniform(60, most)
        sim.recovery_segments = int(sim.recovery_until * 10)
    if rng.random() < on_restart:
        sim.recovery_after_restart = rng.uniform(60, most)
    return sim


def controllers_only(rng: random.Random, first: int, count: int) -> list[SimNode]:
    """`count` controller-only KRaft voters, numbered from `first`."""
    return [
        SimNode(
            Node(
                i, f"controller-{i}", frozenset({Role.CONTROLLER}), f"https://controller-{i}:8443"
            ),
            quorum_lag=rng.uniform(1, 5),
        )
        for i in range(first, first + count)
    ]


def random_cluster(
    rng: random.Random,
    clock: VirtualClock,
    size: int,
    *,
    recovering_at_start: float = 0.2,
    recovery_on_restart: float = 0.2,
    max_recovery: float = 3600,
    catch_up: tuple[float, float] = (10.0, 300.0),
    controller_only: bool = False,
) -> SimCluster:
    """`size` brokers; three KRaft voters, combined with brokers or (`controller_only`) three
    more nodes; 4 user partitions per broker (RF 1-3, min ISR 1-2) and the internal topics."""
    nodes = []
    combined = set() if controller_only else set(rng.sample(range(size), k=min(3, size)))
    for i in range(size):
        roles = {Role.BROKER} | ({Role.CONTROLLER} if i in combined else set())
        sim = SimNode(
            Node(i, f"kafka-{i}", frozenset(roles), f"https://kafka-{i}:8443"),
            restart_seconds=rng.uniform(20, 120),
            catch_up_seconds=rng.uniform(*catch_up),
            quorum_lag=rng.uniform(1, 5),
            # 6 of 8 real recoveries ran in STARTING, 2 in RECOVERY (field notes)
            recovery_state=BrokerState.RECOVERY if i % 4 == 3 else BrokerState.STARTING,
        )
        nodes.append(recoveries(sim, rng, recovering_at_start, recovery_on_restart, max_recovery))
    nodes += controllers_only(rng, size, 3 if controller_only else 0)
    partitions = []
    for index in range(size * 4):
        replication = min(size, rng.choice([1, 2, 3, 3, 3]))
        replicas = tuple(rng.sample(range(size), k=replication))
        partitions.append(SimPartition("t", index, replicas, rng.choice([1, 2, 2])))
    partitions += internal_topics(rng, list(range(size)))
    cluster = SimCluster(nodes, partitions, clock)
    spread_rejoins(cluster, rng)
    return cluster


def rack_cluster(
    rng: random.Random,
    clock: VirtualClock,
    size: int,
    *,
    racks: int = 3,
    placement: str = "rack_aware",
    partitions_per_broker: int = 4,
    replication: tuple[int, int] = (3, 3),
    min_isr: tuple[int, int] | None = None,
    recovering_at_start: float = 0.0,
    recovery_on_restart: float = 0.0,
    max_recovery: float = 600.0,
    lagging: float = 0.0,
    catch_up: tuple[float, float] = (10.0, 300.0),
    controllers: int = 3,
) -> SimCluster:
    """`size` brokers over `racks` racks (broker i in rack i mod racks), `controllers` dedicated
    KRaft controllers, and partitions placed `rack_aware` (each partition's replicas on
    distinct racks while there are racks enough, as Kafka's rack-aware placer does) or
    `random`; replication drawn from `replication`, min ISR from `min_isr` (default 1..RF-1,
    at least 1). `lagging`: the share of partitions whose last replica is out of sync at the
    start (a lagging follower: the ISR is short until it catches up, 1 to 10 minutes in)."""
    names = [chr(ord("a") + r) for r in range(racks)] if racks else []
    rack_of = {i: names[i % racks] for i in range(size)} if racks else {}
    by_rack: dict[str, list[int]] = {}
    for broker, rack in rack_of.items():
        by_rack.setdefault(rack, []).append(broker)
    nodes = []
    for i in range(size):
        sim = SimNode(
            Node(i, f"kafka-{i}", frozenset({Role.BROKER}), f"https://kafka-{i}:8443"),
            restart_seconds=rng.uniform(20, 120),
            catch_up_seconds=rng.uniform(*catch_up),
            recovery_state=BrokerState.RECOVERY if i % 4 == 3 else BrokerState.STARTING,
        )
        nodes.append(recoveries(sim, rng, recovering_at_start, recovery_on_restart, max_recovery))
    nodes += controllers_only(rng, size, controllers)
    partitions = []
    rack_names = sorted(by_rack)
    for index in range(size * partitions_per_broker):
        factor = min(size, rng.randint(*replication))
        if placement == "rack_aware" and rack_names:
            start = rng.randrange(len(rack_names))
            chosen: list[int] = []
            for k in range(factor):
                rack = rack_names[(start + k) % len(rack_names)]
                pool = [b for b in by_rack[rack] if b not in chosen]
                # More replicas than racks: the rest anywhere, as Kafka's placer does.
                pool = pool or [b for b in range(size) if b not in chosen]
                chosen.append(rng.choice(pool))
            replicas = tuple(chosen)
        else:
            replicas = tuple(rng.sample(range(size), k=factor))
        low, high = min_isr if min_isr is not None else (1, max(1, factor - 1))
        partitions.append(SimPartition("t", index, replicas, min(factor, rng.randint(low, high))))
    cluster = SimCluster(nodes, partitions, clock, rack_of)
    spread_rejoins(cluster, rng)
    for index, p in enumerate(partitions):
        sim = cluster.by_id[p.replicas[-1]]
        if len(p.replicas) > 1 and rng.random() < lagging and sim.catch_up_seconds > 0:
            # Its last replica is behind when the roll starts and catches up 1 to 10 minutes
            # into it (its run started a day ago: the fraction of its catch-up time says when).
            moment = rng.uniform(60, 600) - sim.running_at
            sim.rejoin[index] = moment / sim.catch_up_seconds
    return cluster


def spread_rejoins(cluster: SimCluster, rng: random.Random | None = None) -> None:
    """Each broker rejoins its partitions' ISRs evenly over its catch-up time, in a random
    order (without `rng`, in partition order); a partition with no other replica at once."""
    for node_id, hosted in cluster.hosted.items():
        sim = cluster.by_id[node_id]
        shared = [i for i in hosted if len(cluster.partitions[i].replicas) > 1]
        if rng is not None:
            rng.shuffle(shared)
        sim.rejoin = {i: 0.0 for i in hosted}
        sim.rejoin.update({i: (k + 1) / len(shared) for k, i in enumerate(shared)})


def default_settings() -> RollSettings:
    return RollSettings(
        operation_timeout=300, poll_interval=10, max_recovery_wait=6 * 3600, stall_timeout=600
    )


def make_roller(
    cluster: SimCluster,
    folder: Path,
    settings: RollSettings | None = None,
    *,
    platform: Callable[[SimCluster, AgentClient, Path], SimPlatform] | None = None,
    configs: LiveConfigs | None = None,
) -> Roller:
    """The production roller on `cluster` (`platform`: a SimPlatform of the test's own;
    `configs`: the desired configurations' live steps)."""
    clock = cluster.clock
    agents = AgentClient(
        trusting_nothing(),  # never used (a mock transport): no CA bundle loaded for nothing
        RetryPolicy(max_retries=2),
        transport=httpx.MockTransport(cluster.handle),
        sleep=clock.sleep,
    )

    async def observe() -> ClusterView:
        return cluster.cluster_view()

    return Roller(
        (platform or SimPlatform)(cluster, agents, folder),
        observe,
        agents,
        FileJournalStore(folder),
        EventLog(folder / "events.jsonl", "sim"),
        settings=settings or default_settings(),
        policy=RetryPolicy(max_retries=30, initial_backoff_ms=5000, max_backoff_ms=60000),
        clock=clock,
        sleep=clock.sleep,
        configs=configs,
    )


def run_roll(
    cluster: SimCluster, folder: Path, settings: RollSettings | None = None
) -> tuple[str, str]:
    """Roll the cluster with the production roller: ("completed", "") or ("failed", why)."""
    failure = asyncio.run(rolled(make_roller(cluster, folder, settings), "sim"))
    return ("failed", failure) if failure is not None else ("completed", "")


async def rolled(roller: Roller, roll_id: str, *, resume: bool = False) -> str | None:
    """`roller`'s roll to its end: None, or why it failed (its `RollFailed`)."""
    try:
        await roller.roll(roll_id, resume=resume)
    except RollFailed as exc:
        return str(exc)
    finally:
        await roller.agents.aclose()
    return None
