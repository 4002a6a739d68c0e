"""Properties of the roll over random clusters on a virtual clock.

Whatever the cluster, the production roller never restarts a broker in recovery and never takes
a partition below min.insync.replicas; and when it completes, every node was restarted once.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from roll_sim import VirtualClock, random_cluster, run_roll


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 7))
def test_the_roll_never_restarts_a_recovering_broker_nor_breaks_min_isr(
    seed: int, size: int
) -> None:
    rng = random.Random(seed)
    cluster = random_cluster(rng, VirtualClock(), size)
    with tempfile.TemporaryDirectory() as folder:
        outcome, reason = run_roll(cluster, Path(folder))
    assert cluster.violations.restarted_recovering == []
    assert cluster.violations.below_min_isr == []
    if outcome == "completed":
        assert all(n.restarts == 1 for n in cluster.nodes.values())
    else:
        assert reason  # a failed roll says why
