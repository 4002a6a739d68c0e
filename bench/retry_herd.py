"""Thundering herd: 100 roller clients retrying against an agent that refuses (503) for 2 s.

    .venv/bin/python bench/retry_herd.py [--runs 5] [--clients 100]

Runs the herd of `tests/herd.py` with jitter 0 and jitter 0.25 (the default), interleaved, and
reports the median of the largest number of retry arrivals in any 50 ms window, over all retries
and within each retry wave (wave n: every client's retry number n).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from rollguard.peers.herd import HerdResult, run_herd
from rollguard.peers.processes import make_pki

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--clients", type=int, default=100)
    args = parser.parse_args()
    pki = make_pki(Path(tempfile.mkdtemp()))
    results: dict[float, list[HerdResult]] = {0.0: [], 0.25: []}
    for _ in range(args.runs):
        for jitter, runs in results.items():
            result = run_herd(pki, jitter, clients=args.clients)
            assert result.reported == args.clients, result
            runs.append(result)
    summary = {}
    for jitter, runs in results.items():
        peaks = [r.peak_retries_per_window for r in runs]
        waves = min(len(r.wave_peaks) for r in runs)
        summary[f"jitter {jitter}"] = {
            "median_peak_per_50ms": statistics.median(peaks),
            "runs": peaks,
            "median_peak_per_50ms_by_wave": [
                statistics.median(r.wave_peaks[n] for r in runs) for n in range(waves)
            ],
        }
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
