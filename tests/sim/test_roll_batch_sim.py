"""Batch rolls by the production roller on a virtual clock (`rollguard.peers.sim`).

Random clusters in racks (rack-aware and random placements, replication 1 to 5, min ISR 1 to
RF, brokers recovering when the roll starts or after their restart, lagging followers): the
simulation's own checks find no restart of a recovering broker, nothing below min ISR, nothing
offline; each broker restarts once; a batch starts only once the previous one is back in sync;
batches really run together; and `--max-batch-size 1` rolls exactly as before, one at a time.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollguard.peers.harness_sim import SimRoll
from rollguard.peers.sim import SimCluster, VirtualClock, rack_cluster


def batches(cluster: SimCluster) -> list[list[str]]:
    """The restarts grouped by the moment they happened: a batch restarts at one moment."""
    groups: dict[float, list[str]] = {}
    for entry in cluster.log:
        groups.setdefault(entry.at, []).append(entry.name)
    return list(groups.values())


def assert_safe(cluster: SimCluster) -> None:
    v = cluster.violations
    assert (v.restarted_recovering, v.below_min_isr, v.offline, v.quorum_lost) == ([], [], [], [])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    size=st.integers(2, 12),
    max_size=st.integers(2, 6),
    placement=st.sampled_from(["rack_aware", "random"]),
)
def test_batch_rolls_are_safe_on_random_clusters(
    seed: int, size: int, max_size: int, placement: str
) -> None:
    rng = random.Random(seed)
    cluster = rack_cluster(
        rng,
        VirtualClock(),
        size,
        racks=rng.randint(0, 3),
        placement=placement,
        replication=(1, min(5, size)),
        min_isr=(1, 5),
        recovering_at_start=0.2,
        recovery_on_restart=0.2,
        lagging=0.1,
        catch_up=(5.0, 120.0),
    )
    done = SimRoll(cluster).roll(max_batch_size=max_size)
    assert (done.returncode, done.stderr) == (0, "")
    assert_safe(cluster)
    assert all(n.restarts == 1 for n in cluster.nodes.values())
    for group in batches(cluster):
        assert len(group) <= max_size
        assert not any(name.startswith("controller") for name in group) or len(group) == 1
    # Each batch waits for the one before to be back in sync.
    synced = 0.0
    for moment in sorted({e.at for e in cluster.log}):
        assert moment >= synced
        synced = max(e.synced_at for e in cluster.log if e.at == moment)
    assert done.journal is not None
    numbered = {name: r.get("batch") for name, r in done.journal["nodes"].items()}
    for group in batches(cluster):
        if len(group) > 1:
            assert len({numbered[name] for name in group}) == 1


def test_six_brokers_in_three_racks_roll_in_three_batches_one_rack_each() -> None:
    cluster = rack_cluster(random.Random(7), VirtualClock(), 6, racks=3, min_isr=(2, 2))
    done = SimRoll(cluster).roll(max_batch_size=2)
    assert done.returncode == 0 and done.journal is not None
    assert_safe(cluster)
    brokers = [g for g in batches(cluster) if g[0].startswith("kafka")]
    assert [sorted(g) for g in brokers] == [
        ["kafka-0", "kafka-3"],
        ["kafka-1", "kafka-4"],
        ["kafka-2", "kafka-5"],
    ]
    assert done.journal["nodes"]["kafka-0"]["batch"] == done.journal["nodes"]["kafka-3"]["batch"]


def test_a_batch_of_one_is_todays_serial_roll() -> None:
    serial = rack_cluster(random.Random(3), VirtualClock(), 6, racks=3)
    done = SimRoll(serial).roll(max_batch_size=1)
    assert done.returncode == 0 and done.journal is not None
    assert all(len(g) == 1 for g in batches(serial))
    assert all("batch" not in r for r in done.journal["nodes"].values())


def test_batches_shorten_the_roll() -> None:
    # Nine brokers and three controllers: twelve restarts one at a time, or three controllers
    # and three batches of three.
    times, counts = [], []
    for size in (1, 3):
        cluster = rack_cluster(random.Random(5), VirtualClock(), 9, racks=3, min_isr=(2, 2))
        assert SimRoll(cluster).roll(max_batch_size=size).returncode == 0
        assert_safe(cluster)
        times.append(cluster.clock.now)
        counts.append(len(batches(cluster)))
    assert counts == [12, 6]
    assert times[1] < times[0] * 0.6, times
