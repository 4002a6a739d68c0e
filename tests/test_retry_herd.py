"""Jitter spreads a herd of retrying clients: the busiest 50 ms sees fewer retries with it."""

from __future__ import annotations

import pytest

from rollguard.peers.herd import WINDOW, peak, run_herd

from helpers import Pki

# The peaks are arrival times at one server: run where no other test competes for the CPU.
pytestmark = pytest.mark.alone


def test_peak_counts_the_busiest_window() -> None:
    assert peak([0.0, 0.01, 0.049, 0.05, 0.2]) == 3
    assert peak([]) == 0
    assert peak([1.0] * 7) == 7
    assert WINDOW == 0.05


def test_with_100_clients_jitter_lowers_the_peak_of_retry_arrivals(pki: Pki) -> None:
    lockstep = run_herd(pki, jitter=0.0)
    jittered = run_herd(pki, jitter=0.25)
    for result in (lockstep, jittered):
        assert result.reported == 100, result  # every client got through once the agent was up
        assert result.retry_arrivals >= 300, result  # 3 retry waves at least within 2 s
    assert jittered.peak_retries_per_window < lockstep.peak_retries_per_window, (
        lockstep,
        jittered,
    )
