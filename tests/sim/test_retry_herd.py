"""Jitter spreads a herd of retrying clients: the busiest 50 ms of a retry wave sees fewer retries.

The figure compared is the third retry wave's: by then each client's delay has drawn jitter three
times (up to 75 + 150 + 300 ms at the defaults), while without jitter the wave is only as wide as
the time one event loop takes to send 100 requests. The first wave's spread (75 ms) is close to
that sending time, so its peak depends on how busy the machine is; `bench/retry_herd.py` reports
both figures.
"""

from __future__ import annotations

import statistics

import pytest

from rollguard.peers.herd import WINDOW, peak, retry_waves, run_herd

from helpers import Pki

# The peaks are arrival times at one server: run where no other test competes for the CPU.
pytestmark = pytest.mark.alone


def test_peak_counts_the_busiest_window() -> None:
    assert peak([0.0, 0.01, 0.049, 0.05, 0.2]) == 3
    assert peak([]) == 0
    assert peak([1.0] * 7) == 7
    assert WINDOW == 0.05


def test_retry_waves_number_each_connections_requests() -> None:
    arrivals = [(0.0, "a", 1), (0.0, "b", 2), (0.3, "b", 2), (0.31, "a", 1), (0.9, "a", 1)]
    assert retry_waves(arrivals) == [[0.3, 0.31], [0.9]]
    assert retry_waves([(0.0, "a", 1)]) == []


def test_with_100_clients_jitter_lowers_the_peak_of_a_retry_wave(pki: Pki) -> None:
    lockstep, jittered = [], []
    for _ in range(3):  # interleaved, so that a busy moment falls on both
        lockstep.append(run_herd(pki, jitter=0.0))
        jittered.append(run_herd(pki, jitter=0.25))
    for result in (*lockstep, *jittered):
        assert result.reported == 100, result  # every client got through once the agent was up
        assert result.retry_arrivals >= 300, result  # 3 retry waves at least within 2 s
        assert len(result.wave_peaks) >= 3, result
    third = [statistics.median(r.wave_peaks[2] for r in runs) for runs in (lockstep, jittered)]
    assert third[1] < third[0], (lockstep, jittered)
