"""What the simulated KRaft cluster behind `rollguard.peers.kafka` reports at a given moment.

`rollguard.peers.kafka` speaks the Kafka wire protocol; this module is the cluster it
describes. A roller tested against it must meet what production shows on every roll, so the
model follows a real KRaft cluster's rules and timings rather than flipping state at once:

- a started broker is fenced (absent from Metadata, in no ISR) until it has caught up with the
  metadata log, then rejoins its partitions' ISRs one by one over its replication catch-up time;
- a stopped leader is replaced from the ISR; the last ISR member stays in the ISR with no
  leader; a restarted broker does not take leadership back before a preferred election;
- a restarted controller fetches from the quorum leader for a moment before it is caught up,
  and a new quorum leader knows nothing of voters that have not fetched from it yet;
- a reassignment keeps the union of old and new replicas until its new replicas are in sync.

Each rule says what Kafka does (read in apache/kafka: `ReplicationControlManager`,
`PartitionChangeBuilder`, `PartitionReassignmentReplicas`, `StripedReplicaPlacer`, raft's
`LeaderState` and `RaftUtil`). Time is injected (`clock`, seconds since the epoch) and timed
changes are applied whenever state is read (`tick`), so the model is exact under a fake clock
and needs no thread. It is not thread-safe: `KafkaClusterSim` holds its lock around each call.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import kafka.errors as Errors

log = logging.getLogger(__name__)

#: Kafka drops an observer from DescribeQuorum after this long without a fetch (LeaderState).
OBSERVER_SESSION_TIMEOUT_MS = 300_000
INITIAL_HIGH_WATERMARK = 1000
#: Replication catch-up of a restarted broker on an idle cluster (see `ClusterModel`).
DEFAULT_CATCH_UP_S = 1.0
#: From a broker's start to its unfencing (see `ClusterModel`).
DEFAULT_UNFENCE_DELAY_S = 0.5
#: From a controller's start until it has caught up with the quorum leader.
DEFAULT_QUORUM_CATCH_UP_S = 0.5
#: `offsets.topic.num.partitions` and `transaction.state.log.num.partitions` defaults.
INTERNAL_TOPIC_PARTITIONS = 50
CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
#: ElectLeaders' election types (ElectionType in Kafka and kafka-python).
PREFERRED, UNCLEAN = 0, 1

Placement = Literal["round_robin", "rack_aware"]
Phase = Literal["stopped", "fenced", "unfenced"]
ElectionOutcome = tuple[type[Errors.BrokerResponseError], str | None]
PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class TopicSpec:
    """A topic of the simulated cluster.

    `min_insync_replicas=None` means no topic override (the broker's value applies); `configs`
    holds other topic-level overrides (e.g. `cleanup.policy`); `internal` is what Metadata
    reports as `is_internal`; `placement` overrides the cluster's replica placement.
    """

    partitions: int = 1
    replication_factor: int = 1
    min_insync_replicas: int | None = None
    internal: bool = False
    configs: Mapping[str, str] = field(default_factory=dict, hash=False)
    placement: Placement | None = None

    def __post_init__(self) -> None:
        if self.partitions < 1 or self.replication_factor < 1:
            raise ValueError(f"partitions and replication_factor must be >= 1: {self}")
        if self.min_insync_replicas is not None and self.min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas must be >= 1: {self}")
        if "min.insync.replicas" in self.configs:
            raise ValueError("give min.insync.replicas as min_insync_replicas, not in configs")
        if self.placement not in (None, "round_robin", "rack_aware"):
            raise ValueError(f"unknown placement: {self.placement!r}")


@dataclass(frozen=True)
class PartitionState:
    """A snapshot of one partition, as the controller sees it.

    While a reassignment is in flight `replicas` is the union of old and new replicas (the
    target first), as Kafka reports it, and `adding_replicas`/`removing_replicas` say which.
    """

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True)
class QuorumReplica:
    """One voter's or observer's replica state, as DescribeQuorum reports it (times in ms)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class QuorumState:
    """A snapshot of the KRaft quorum of the `__cluster_metadata` log."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...]


def internal_topic_specs(
    brokers: int, partitions: int, transaction_min_isr: int
) -> dict[str, TopicSpec]:
    """The topics a real cluster creates for itself, as its coordinators create them.

    Replication factor 3 (`offsets.topic.replication.factor`, `transaction.state.log.
    replication.factor`), capped at the broker count as small clusters configure it. The group
    coordinator sets only `cleanup.policy=compact` on `__consumer_offsets`, so the broker's
    `min.insync.replicas` applies to it; the transaction coordinator also sets
    `min.insync.replicas` from `transaction.state.log.min.isr` (default 2) and
    `unclean.leader.election.enable=false` on `__transaction_state`.
    """
    factor = min(3, brokers)
    return {
        CONSUMER_OFFSETS: TopicSpec(
            partitions, factor, None, internal=True, configs={"cleanup.policy": "compact"}
        ),
        TRANSACTION_STATE: TopicSpec(
            partitions,
            factor,
            transaction_min_isr,
            internal=True,
            configs={"cleanup.policy": "compact", "unclean.leader.election.enable": "false"},
        ),
    }


def round_robin(brokers: Sequence[int], partitions: int, factor: int) -> list[tuple[int, ...]]:
    """Partition p on brokers[p], brokers[p+1], ... (mod the broker count)."""
    count = len(brokers)
    return [tuple(brokers[(p + i) % count] for i in range(factor)) for p in range(partitions)]


def rack_aware(
    brokers: Sequence[int], racks: Mapping[int, str], partitions: int, factor: int
) -> list[tuple[int, ...]]:
    """KRaft's StripedReplicaPlacer with its random starting offsets fixed at 0.

    Racks are taken round robin, each partition starting one rack further, and brokers round
    robin within a rack, so a partition's replicas are on different racks whenever there are
    at least as many racks as replicas. Brokers without a rack form one rack, as in Kafka.
    """
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(brokers):
        by_rack.setdefault(racks.get(broker, ""), []).append(broker)
    names = sorted(by_rack)
    cursors = dict.fromkeys(names, 0)
    placed = []
    for p in range(partitions):
        chosen: list[int] = []
        rack_index = p
        while len(chosen) < factor:
            name = names[rack_index % len(names)]
            rack_index += 1
            members = by_rack[name]
            for _ in members:
                candidate = members[cursors[name] % len(members)]
                cursors[name] += 1
                if candidate not in chosen:
                    chosen.append(candidate)
                    break
        placed.append(tuple(chosen))
    return placed


@dataclass
class _Partition:
    replicas: tuple[int, ...]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    target: tuple[int, ...] = ()  # a reassignment's new replicas, while one is in flight
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def ordered(self, members: Iterable[int]) -> list[int]:
        chosen = set(members)
        return [replica for replica in self.replicas if replica in chosen]


@dataclass
class _Broker:
    phase: Phase = "unfenced"
    unfenced_at: float = 0.0
    #: partition -> when this broker's replica has caught up with the leader (clock seconds)
    rejoin_due: dict[PartitionKey, float] = field(default_factory=dict)


@dataclass
class _QuorumMember:
    """A controller's (voter's) or broker's (observer's) replica of the metadata log."""

    running: bool = True
    lag_ms: int = 0
    lag_offsets: int = 0
    #: Kept while it is down: its own log end, and the leader's last fetch and caught-up times.
    log_end: int = 0
    fetch_ms: int = -1
    caught_up_ms: int = -1
    #: False until it fetches from a newly elected leader, which starts knowing nothing of it.
    seen: bool = True
    catch_up_from_ms: int = 0
    catch_up_until_ms: int = 0  # running but behind the leader until then

    def catching_up(self, now_ms: int) -> bool:
        return self.running and now_ms < self.catch_up_until_ms


class ClusterModel:
    """The simulated cluster's state; every method may raise ValueError naming bad input.

    Timings, taken from real clusters:

    - `unfence_delay` (default 0.5 s): a KRaft broker is fenced from its start until it has
      replayed the metadata log; it then heartbeats at once (BrokerLifecycleManager does not
      wait the 2 s `broker.heartbeat.interval.ms`) and the controller unfences it, well under
      a second on a small cluster. Kafka opens a fixed-port listener only then (SocketServer
      defers it so that an open port does not look like readiness).
    - catch-up (default 1 s, `DEFAULT_CATCH_UP_S`, per broker): on an idle cluster, as in CI,
      a restarted follower reaches the leader's log end in its first fetches
      (`replica.fetch.wait.max.ms` 500 ms) and the leader's AlterPartition is committed at
      once: about a second. Under load it takes tens of seconds to minutes (issue 14 met
      40 s); tests set that per broker. The broker's partitions come due evenly over the
      window from its start, in (topic, partition) order; none joins an ISR before the broker
      is unfenced (the controller refuses a fenced replica) or while the partition has no
      leader to fetch from.
    - `quorum_catch_up` (default 0.5 s, per node): a restarted controller fetches from the
      quorum leader; until its fetch reaches the leader's log end its lastCaughtUpTimestamp
      stays where it was when it stopped, while its lastFetchTimestamp is current again.
    """

    def __init__(
        self,
        broker_ids: Sequence[int],
        voters: Sequence[int],
        topics: Mapping[str, TopicSpec],
        *,
        racks: Mapping[int, str] | None = None,
        placement: Placement = "round_robin",
        catch_up: Mapping[int, float] | None = None,
        default_catch_up: float = DEFAULT_CATCH_UP_S,
        unfence_delay: float = DEFAULT_UNFENCE_DELAY_S,
        quorum_catch_up: float = DEFAULT_QUORUM_CATCH_UP_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.broker_ids = tuple(broker_ids)
        self.voters = tuple(voters)
        if not self.broker_ids or len(set(self.broker_ids)) != len(self.broker_ids):
            raise ValueError(f"broker ids must be non-empty and unique: {broker_ids}")
        if not self.voters or len(set(self.voters)) != len(self.voters):
            raise ValueError(f"voters must be non-empty and unique: {voters}")
        self.racks = dict(racks or {})
        unknown = sorted(set(self.racks) - set(self.broker_ids))
        if unknown:
            raise ValueError(f"racks name unknown brokers: {unknown}")
        if placement not in ("round_robin", "rack_aware"):
            raise ValueError(f"unknown placement: {placement!r}")
        _non_negative("unfence_delay", unfence_delay)
        _non_negative("quorum_catch_up", quorum_catch_up)
        self._clock = clock
        self.unfence_delay = unfence_delay
        self.default_catch_up = _non_negative("catch-up", default_catch_up)
        self._brokers = {broker: _Broker() for broker in self.broker_ids}
        self._catch_up: dict[int, float] = {}
        for broker, seconds in (catch_up or {}).items():
            self.set_catch_up(broker, seconds)
        self._quorum_catch_up = dict.fromkeys((*self.voters, *self.broker_ids), quorum_catch_up)

        self.topics = dict(topics)
        self._partitions: dict[PartitionKey, _Partition] = {}
        for name, spec in self.topics.items():
            if spec.replication_factor > len(self.broker_ids):
                raise ValueError(
                    f"topic {name!r}: replication factor {spec.replication_factor} exceeds "
                    f"the {len(self.broker_ids)} brokers"
                )
            if (spec.placement or placement) == "rack_aware":
                assigned = rack_aware(
                    self.broker_ids, self.racks, spec.partitions, spec.replication_factor
                )
            else:
                assigned = round_robin(self.broker_ids, spec.partitions, spec.replication_factor)
            for index, replicas in enumerate(assigned):
                self._partitions[name, index] = _Partition(replicas, list(replicas), replicas[0])

        #: Every ISR change as (time, (topic, partition), ISR size) and every broker phase change
        #: as (time, broker, phase): the model's own record, for tests that check a roll from
        #: outside the roller (e.g. that no ISR went below min.insync.replicas at any moment).
        self.isr_history: list[tuple[float, PartitionKey, int]] = [
            (self._clock(), key, len(p.isr)) for key, p in sorted(self._partitions.items())
        ]
        self.phase_history: list[tuple[float, int, Phase]] = []

        self.quorum_leader = self.voters[0]
        self.quorum_epoch = 1
        self.high_watermark = INITIAL_HIGH_WATERMARK
        self._voter_state = {voter: _QuorumMember() for voter in self.voters}
        self._observer_state = {
            broker: _QuorumMember() for broker in self.broker_ids if broker not in self.voters
        }

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- brokers -----------------------------------------------------------------------------

    def phase(self, broker_id: int) -> Phase:
        return self._broker(broker_id).phase

    def unfenced(self) -> tuple[int, ...]:
        """The brokers in Metadata: started and unfenced."""
        return tuple(b for b in self.broker_ids if self._brokers[b].phase == "unfenced")

    def set_catch_up(self, broker_id: int, seconds: float) -> None:
        """The broker's replication catch-up time from its next start on."""
        self._broker(broker_id)
        self._catch_up[broker_id] = _non_negative(f"catch-up of broker {broker_id}", seconds)

    def set_default_catch_up(self, seconds: float) -> None:
        """The catch-up time of brokers without their own, from their next start on."""
        self.default_catch_up = _non_negative("catch-up", seconds)

    def catch_up_of(self, broker_id: int) -> float:
        self._broker(broker_id)
        return self._catch_up.get(broker_id, self.default_catch_up)

    def stop_broker(self, broker_id: int) -> bool:
        """A controlled shutdown: out of Metadata and of every ISR; False if already stopped.

        Kafka never empties an ISR (without eligible leader replicas, KIP-966, which this
        model leaves out): the last member stays in it and the partition has no leader (-1)
        until that broker is back. Partitions it led elect the first other ISR member in
        replica order.
        """
        broker = self._broker(broker_id)
        if broker.phase == "stopped":
            return False
        broker.phase = "stopped"
        broker.rejoin_due.clear()
        self.phase_history.append((self._clock(), broker_id, "stopped"))
        for key, partition in self._partitions.items():
            if broker_id in partition.isr and len(partition.isr) > 1:
                partition.isr.remove(broker_id)
                self.isr_history.append((self._clock(), key, len(partition.isr)))
            if partition.leader == broker_id:
                self._elect_online(partition)
        if broker_id in self._observer_state:
            self._freeze(broker_id, self._observer_state[broker_id], self._now_ms())
        return True

    def start_broker(self, broker_id: int) -> bool:
        """The broker process starts, fenced; its catch-up window opens. False if running."""
        broker = self._broker(broker_id)
        if broker.phase != "stopped":
            return False
        now = self._clock()
        broker.phase = "fenced"
        self.phase_history.append((now, broker_id, "fenced"))
        behind = sorted(
            key
            for key, partition in self._partitions.items()
            if broker_id in partition.replicas
            and broker_id not in partition.isr
            and broker_id not in partition.adding
        )
        window = self.catch_up_of(broker_id)
        broker.rejoin_due = {
            key: now + window * (index + 1) / len(behind) for index, key in enumerate(behind)
        }
        if broker_id in self._observer_state:
            # A starting broker fetches the metadata log; it has caught up when it is unfenced.
            self._restart_member(self._observer_state[broker_id], self.unfence_delay)
        return True

    def unfence(self, broker_id: int) -> None:
        """The controller unfences the broker: it is in Metadata and may lead and join ISRs.

        Like `handleBrokerUnfenced`, every partition without a leader elects one again, so a
        last ISR member that comes back leads at once.
        """
        broker = self._broker(broker_id)
        if broker.phase != "fenced":
            raise ValueError(f"broker {broker_id} is {broker.phase}, not fenced")
        broker.phase = "unfenced"
        broker.unfenced_at = self._clock()
        self.phase_history.append((broker.unfenced_at, broker_id, "unfenced"))
        for partition in self._partitions.values():
            if partition.leader == -1:
                self._elect_online(partition)
        member = self._observer_state.get(broker_id)
        if member is not None:
            member.catch_up_until_ms = min(member.catch_up_until_ms, self._now_ms())
        self.tick()

    def catching_up(self, broker_id: int) -> tuple[PartitionKey, ...]:
        """Partitions that have the running broker as a replica and not in their ISR.

        That includes the adding replicas of a reassignment; a stopped broker catches up
        nothing (its partitions are offline replicas instead).
        """
        if self._broker(broker_id).phase == "stopped":
            return ()
        return tuple(
            key
            for key, partition in sorted(self._partitions.items())
            if broker_id in partition.replicas and broker_id not in partition.isr
        )

    def tick(self) -> None:
        """Apply the ISR rejoins that have come due."""
        now = self._clock()
        for broker_id, broker in self._brokers.items():
            if broker.phase != "unfenced" or not broker.rejoin_due:
                continue
            for key, due in sorted(broker.rejoin_due.items(), key=lambda item: item[1]):
                if now < max(due, broker.unfenced_at):
                    break
                partition = self._partitions[key]
                if partition.leader == -1 and broker_id in partition.replicas:
                    continue  # no leader to fetch from: it joins once there is one
                del broker.rejoin_due[key]
                if broker_id in partition.replicas and broker_id not in partition.isr:
                    partition.isr = partition.ordered([*partition.isr, broker_id])
                    self.isr_history.append((now, key, len(partition.isr)))
                    self._maybe_complete_reassignment(partition)
            if not broker.rejoin_due:
                log.info("broker %d has caught up: back in the ISR of its partitions", broker_id)

    # -- partitions --------------------------------------------------------------------------

    def partition_state(self, topic: str, partition: int) -> PartitionState:
        return self._snapshot(topic, partition, self._partition(topic, partition))

    def partitions_of(self, topic: str) -> list[PartitionState]:
        count = self.topics[topic].partitions
        return [self.partition_state(topic, index) for index in range(count)]

    def set_isr(self, topic: str, partition: int, isr: Sequence[int]) -> None:
        """Set a partition's ISR (unfenced replicas only); a leader outside it is replaced.

        Replicas left out stay out, like a lagging follower: their pending rejoin is dropped.
        """
        state = self._partition(topic, partition)
        members = list(isr)
        if len(set(members)) != len(members):
            raise ValueError(f"duplicate ISR members: {members}")
        if not set(members) <= set(state.replicas):
            raise ValueError(f"ISR {members} is not a subset of replicas {state.replicas}")
        down = [member for member in members if self._brokers[member].phase != "unfenced"]
        if down:
            raise ValueError(f"stopped or fenced brokers cannot be in the ISR: {down}")
        state.isr = state.ordered(members)
        self.isr_history.append((self._clock(), (topic, partition), len(state.isr)))
        for broker_id in set(state.replicas) - set(members):
            self._brokers[broker_id].rejoin_due.pop((topic, partition), None)
        self._elect_online(state)
        self._maybe_complete_reassignment(state)

    def elect(self, topic: str, partition: int, election: int) -> ElectionOutcome:
        """One partition of an ElectLeaders request, as `ReplicationControlManager` answers it.

        PREFERRED: ELECTION_NOT_NEEDED if the first replica leads; else it leads if it is an
        unfenced ISR member; else PREFERRED_LEADER_NOT_AVAILABLE, unless the partition has no
        leader and another ISR member can take it. UNCLEAN: ELECTION_NOT_NEEDED if there is a
        leader; else an ISR member, else any unfenced replica (the ISR becomes just it).
        """
        if topic not in self.topics:
            return Errors.UnknownTopicOrPartitionError, f"No such topic as {topic}"
        state = self._partitions.get((topic, partition))
        if state is None:
            message = f"No such partition as {topic}-{partition}"
            return Errors.UnknownTopicOrPartitionError, message
        if election == PREFERRED:
            preferred = state.replicas[0]
            if state.leader == preferred:
                return Errors.ElectionNotNeededError, None
            if self._can_lead(state, preferred):
                self._set_leader(state, preferred)
            elif state.leader != -1 or not self._elect_online(state):
                return Errors.PreferredLeaderNotAvailableError, None
            return Errors.NoError, None
        if state.leader != -1:
            return Errors.ElectionNotNeededError, None
        if self._elect_online(state):
            return Errors.NoError, None
        live = [r for r in state.replicas if self._brokers[r].phase == "unfenced"]
        if not live:
            return Errors.EligibleLeadersNotAvailableError, None
        state.isr = [live[0]]
        self._set_leader(state, live[0])
        return Errors.NoError, None

    def elect_preferred_leaders(self) -> int:
        """A preferred election of every partition; how many changed leader."""
        return sum(
            self.elect(topic, index, PREFERRED)[0] is Errors.NoError
            for topic, index in sorted(self._partitions)
        )

    def start_reassignment(self, topic: str, partition: int, target: Sequence[int]) -> None:
        """Begin moving a partition to `target` replicas (in that preference order).

        As `PartitionReassignmentReplicas` does: replicas become the target followed by the
        removed ones, adding = target - current, removing = current - target (both sorted).
        Adding replicas stay out of the ISR until `finish_reassignment`; the reassignment
        completes as soon as every target replica is in the ISR (at once if none is added).
        """
        state = self._partition(topic, partition)
        wanted = tuple(target)
        if not wanted or len(set(wanted)) != len(wanted):
            raise ValueError(f"target replicas must be non-empty and unique: {list(wanted)}")
        unknown = sorted(set(wanted) - set(self.broker_ids))
        if unknown:
            raise ValueError(f"target replicas name unknown brokers: {unknown}")
        if state.target:
            raise ValueError(f"{topic}-{partition} already has a reassignment in flight")
        current = set(state.replicas)
        removing = tuple(sorted(current - set(wanted)))
        state.adding = tuple(sorted(set(wanted) - current))
        state.removing = removing
        state.replicas = (*wanted, *removing)
        state.isr = state.ordered(state.isr)
        if not state.adding and not removing:
            return  # a new order of the same replicas is applied at once, never in flight
        state.target = wanted
        for broker_id in state.adding:
            self._brokers[broker_id].rejoin_due.pop((topic, partition), None)
        log.info("%s-%d: reassignment to %s started", topic, partition, list(wanted))
        self._maybe_complete_reassignment(state)

    def finish_reassignment(self, topic: str, partition: int) -> None:
        """The adding replicas have caught up: they join the ISR and the reassignment ends.

        It stays in flight while another target replica is out of the ISR (it completes when
        that one rejoins).
        """
        state = self._partition(topic, partition)
        if not state.target:
            raise ValueError(f"{topic}-{partition} has no reassignment in flight")
        down = [r for r in state.adding if self._brokers[r].phase != "unfenced"]
        if down:
            raise ValueError(f"adding replicas {down} are not running: they cannot catch up")
        state.isr = state.ordered([*state.isr, *state.adding])
        self._maybe_complete_reassignment(state)

    # -- partition helpers --------------------------------------------------------------------

    def _broker(self, broker_id: int) -> _Broker:
        try:
            return self._brokers[broker_id]
        except KeyError:
            raise ValueError(f"unknown broker {broker_id}") from None

    def _partition(self, topic: str, partition: int) -> _Partition:
        try:
            return self._partitions[topic, partition]
        except KeyError:
            raise ValueError(f"unknown partition {topic}-{partition}") from None

    def _snapshot(self, topic: str, index: int, state: _Partition) -> PartitionState:
        return PartitionState(
            topic=topic,
            partition=index,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            replicas=state.replicas,
            isr=tuple(state.isr),
            offline_replicas=tuple(
                r for r in state.replicas if self._brokers[r].phase != "unfenced"
            ),
            adding_replicas=state.adding,
            removing_replicas=state.removing,
        )

    def _can_lead(self, state: _Partition, replica: int) -> bool:
        return replica in state.isr and self._brokers[replica].phase == "unfenced"

    def _set_leader(self, state: _Partition, leader: int) -> None:
        if state.leader != leader:
            state.leader = leader
            state.leader_epoch += 1

    def _elect_online(self, state: _Partition) -> bool:
        """Keep a valid leader, else the first ISR member able to lead, else none (-1).

        Returns whether the partition has a leader afterwards.
        """
        if state.leader != -1 and self._can_lead(state, state.leader):
            return True
        leader = next((r for r in state.replicas if self._can_lead(state, r)), -1)
        self._set_leader(state, leader)
        return leader != -1

    def _maybe_complete_reassignment(self, state: _Partition) -> None:
        """Kafka's `maybeCompleteReassignment`: done once every target replica is in sync."""
        if not state.target:
            return
        isr = [r for r in state.isr if r not in state.removing]
        if not isr or not set(state.target) <= set(isr):
            return
        shrinks = bool(state.removing)
        state.replicas, state.target = state.target, ()
        state.adding = state.removing = ()
        state.isr = state.ordered(isr)
        epoch = state.leader_epoch
        self._elect_online(state)
        if shrinks and state.leader_epoch == epoch:
            state.leader_epoch += 1  # a replica set that loses members bumps the leader epoch
        log.info("reassignment done: replicas %s", list(state.replicas))

    # -- the KRaft quorum ----------------------------------------------------------------------

    def set_quorum_catch_up(self, node_id: int, seconds: float) -> None:
        """How long the node is behind the quorum leader after its next start."""
        if node_id not in self._quorum_catch_up:
            raise ValueError(f"unknown node {node_id}")
        self._quorum_catch_up[node_id] = _non_negative(f"quorum catch-up of {node_id}", seconds)

    def quorum_catching_up(self, node_id: int) -> bool:
        member = self._voter_state.get(node_id) or self._observer_state.get(node_id)
        if member is None:
            raise ValueError(f"{node_id} is neither a voter nor an observer")
        return member.catching_up(self._now_ms())

    def set_voter_lag(self, voter_id: int, ms: int, *, offsets: int = 0) -> None:
        if ms < 0 or offsets < 0:
            raise ValueError("lag must be >= 0")
        member = self._voter(voter_id)
        if voter_id == self.quorum_leader:
            raise ValueError(f"voter {voter_id} is the quorum leader; it cannot lag itself")
        member.lag_ms, member.lag_offsets = ms, offsets

    def stop_voter(self, voter_id: int) -> bool:
        member = self._voter(voter_id)
        if not member.running:
            return False
        self._freeze(voter_id, member, self._now_ms())
        self._reelect()
        return True

    def start_voter(self, voter_id: int) -> bool:
        member = self._voter(voter_id)
        if member.running:
            return False
        self._restart_member(member, self._quorum_catch_up[voter_id])
        self._reelect()
        return True

    def set_quorum_leader(self, voter_id: int) -> None:
        member = self._voter(voter_id)
        if not member.running:
            raise ValueError(f"voter {voter_id} is not running")
        if not self._has_majority():
            raise ValueError("no majority of voters is running; no leader can be elected")
        if voter_id != self.quorum_leader:
            self._change_leader(voter_id)
        member.lag_ms = member.lag_offsets = 0

    def advance_quorum(self, records: int) -> None:
        if records < 0:
            raise ValueError("records must be >= 0")
        if self.quorum_leader == -1:
            raise ValueError("the quorum has no leader; nothing can be appended")
        self.high_watermark += records

    def quorum_state(self) -> QuorumState:
        """DescribeQuorum's view, from the leader (`RaftUtil.toReplicaState`).

        The leader reports itself fetched and caught up now. A follower's lastCaughtUp is the
        last time its fetch reached the leader's log end: it stays put while the follower is
        down or catching up, and is -1 (with log end and fetch time) for a node that has not
        fetched from the current leader since its election. Observers that have not fetched
        for `OBSERVER_SESSION_TIMEOUT_MS` are dropped.
        """
        now_ms = self._now_ms()

        def replica(node: int, member: _QuorumMember) -> QuorumReplica:
            return QuorumReplica(node, *self._replica(node, member, now_ms))

        observers = tuple(
            replica(broker, member)
            for broker, member in self._observer_state.items()
            if member.seen
            and (member.running or now_ms - member.fetch_ms < OBSERVER_SESSION_TIMEOUT_MS)
        )
        return QuorumState(
            leader_id=self.quorum_leader,
            leader_epoch=self.quorum_epoch,
            high_watermark=self.high_watermark,
            voters=tuple(replica(v, self._voter_state[v]) for v in self.voters),
            observers=observers,
        )

    # -- quorum helpers -----------------------------------------------------------------------

    def _voter(self, voter_id: int) -> _QuorumMember:
        if voter_id not in self._voter_state:
            raise ValueError(f"{voter_id} is not a voter: {self.voters}")
        return self._voter_state[voter_id]

    def _members(self) -> Iterable[tuple[int, _QuorumMember]]:
        yield from self._voter_state.items()
        yield from self._observer_state.items()

    def _log_end(self, node: int, member: _QuorumMember, now_ms: int) -> int:
        """The member's own log end offset (what it would bring to an election)."""
        if node == self.quorum_leader:
            return self.high_watermark
        if not member.running:
            return member.log_end
        target = max(0, self.high_watermark - member.lag_offsets)
        if member.catching_up(now_ms):
            span = member.catch_up_until_ms - member.catch_up_from_ms
            done = (now_ms - member.catch_up_from_ms) / span
            return member.log_end + math.floor((target - member.log_end) * done)
        return target

    def _replica(self, node: int, member: _QuorumMember, now_ms: int) -> tuple[int, int, int]:
        """(log end offset, last fetch, last caught up) as the leader reports them."""
        if node == self.quorum_leader:
            return self.high_watermark, now_ms, now_ms
        if not member.seen:
            return -1, -1, -1
        if not member.running:
            return member.log_end, member.fetch_ms, member.caught_up_ms
        log_end = self._log_end(node, member, now_ms)
        if member.catching_up(now_ms):
            return log_end, now_ms, member.caught_up_ms
        return log_end, now_ms, max(member.caught_up_ms, now_ms - member.lag_ms)

    def _freeze(self, node: int, member: _QuorumMember, now_ms: int) -> None:
        if member.seen:
            member.log_end, member.fetch_ms, member.caught_up_ms = self._replica(
                node, member, now_ms
            )
        else:
            member.log_end = self._log_end(node, member, now_ms)
        member.running = False
        member.catch_up_until_ms = 0

    def _restart_member(self, member: _QuorumMember, catch_up_s: float) -> None:
        now_ms = self._now_ms()
        member.running = member.seen = True
        member.catch_up_from_ms = now_ms
        member.catch_up_until_ms = now_ms + round(catch_up_s * 1000)

    def _has_majority(self) -> bool:
        running = sum(1 for member in self._voter_state.values() if member.running)
        return running > len(self.voters) // 2

    def _reelect(self) -> None:
        """Without a majority there is no leader; a leader that stopped is replaced.

        Raft grants votes only to a candidate whose log is at least as long as the voter's, so
        the running voter with the longest log wins (ties: the first in voter order).
        """
        if not self._has_majority():
            self.quorum_leader = -1
            return
        if self.quorum_leader != -1 and self._voter_state[self.quorum_leader].running:
            return
        now_ms = self._now_ms()
        running = [v for v in self.voters if self._voter_state[v].running]
        winner = max(
            running,
            key=lambda v: (self._log_end(v, self._voter_state[v], now_ms), -running.index(v)),
        )
        self._change_leader(winner)

    def _change_leader(self, voter_id: int) -> None:
        """A new epoch: the new leader's replica states start empty (`LeaderState`).

        Running nodes fetch from it at once; one still catching up has no caught-up time yet;
        stopped ones are unknown to it (-1) until they fetch.
        """
        now_ms = self._now_ms()
        for node, member in self._members():
            if member.running:
                member.caught_up_ms = -1
                if member.catching_up(now_ms):
                    member.log_end = self._log_end(node, member, now_ms)
                    member.catch_up_from_ms = now_ms
            else:
                member.seen = False
                member.fetch_ms = member.caught_up_ms = -1
        self.quorum_leader = voter_id
        self.quorum_epoch += 1
        leader = self._voter_state[voter_id]
        leader.lag_ms = leader.lag_offsets = 0
        leader.catch_up_until_ms = 0


def _non_negative(what: str, seconds: float) -> float:
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, not {seconds!r}")
    return float(seconds)
