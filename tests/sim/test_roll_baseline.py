"""After a restart the roll waits for what the restart took away, not for what was missing before.

The production roller on the virtual clock (`rollguard.peers.sim`): broker 2 is a replica of
`payments-0` that is not in its ISR before the roll and never will be (a follower that cannot
keep up). Restarting it cannot take it out of that ISR, so the roll does not wait for it to
join: it says the partition was already out of sync before, and goes on. A partition it was in
before its restart is still waited for, as ever.
"""

from __future__ import annotations

import math
from pathlib import Path

from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import (
    SimCluster,
    SimNode,
    SimPartition,
    VirtualClock,
    spread_rejoins,
)
from rollguard.roller.model import Node, Role

COMBINED = frozenset({Role.BROKER, Role.CONTROLLER})


def cluster(*, lagging: bool) -> SimCluster:
    nodes = [
        SimNode(
            Node(i, f"kafka-{i}", COMBINED, f"https://kafka-{i}:8443"),
            restart_seconds=30,
            catch_up_seconds=60,
        )
        for i in range(3)
    ]
    partitions = [
        SimPartition("payments", 0, (0, 1, 2), 1),
        SimPartition("orders", 0, (2, 0, 1), 2),
    ]
    sim = SimCluster(nodes, partitions, VirtualClock())
    spread_rejoins(sim)
    if lagging:
        sim.by_id[2].rejoin[0] = math.inf  # payments-0: never in sync on broker 2
    return sim


def test_a_partition_already_out_of_sync_before_the_restart_is_not_waited_for(
    tmp_path: Path,
) -> None:
    sim = cluster(lagging=True)
    assert 2 not in sim.cluster_view().partitions[0].isr  # out of sync before the roll
    done = SimRoll(sim, tmp_path).roll(safety_wait=600)
    assert (done.returncode, done.stderr) == (0, "")
    assert sorted(e.name for e in sim.log) == ["kafka-0", "kafka-1", "kafka-2"]
    said = done.of("out-of-sync-before")
    assert [(e["node"], e["reason"]) for e in said] == [
        ("kafka-2", "already out of sync before its restart: payments-0")
    ]
    ready = done.of("ready", "kafka-2")[0]
    assert "already out of sync before its restart: payments-0" in str(ready["reason"])
    journal = done.journal
    assert journal is not None
    assert journal["nodes"]["kafka-2"]["outOfSyncBefore"] == ["payments-0"]
    assert "outOfSyncBefore" not in journal["nodes"]["kafka-0"]
    v = sim.violations
    assert (v.restarted_recovering, v.below_min_isr, v.offline, v.quorum_lost) == ([], [], [], [])


def test_a_partition_the_broker_was_in_before_is_waited_for_until_it_rejoins(
    tmp_path: Path,
) -> None:
    sim = cluster(lagging=False)
    done = SimRoll(sim, tmp_path).roll()
    assert (done.returncode, done.stderr) == (0, "")
    # Each restart came only once the previous broker was back in every ISR it had left.
    for earlier, later in zip(sim.log, sim.log[1:], strict=False):
        assert later.at >= earlier.synced_at, (earlier, later)
    catch_ups = {e["node"] for e in done.of("catch-up")}
    assert catch_ups  # the waits for ISRs the restarts took away were there
    assert not done.of("out-of-sync-before")
