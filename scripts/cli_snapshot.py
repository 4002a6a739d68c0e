"""What every command says: its --help, and its answer to a few bad values, one file each.

    .venv/bin/python scripts/cli_snapshot.py OUT_DIR [--bin .venv/bin]

Run it before and after a change to the settings or the parsers, then `diff -r` the two folders:
every command and sub-command is found by walking the console scripts' parsers (and `rollguard
roll pause|resume`, which has its own), each run by its console script with COLUMNS=100, no
ROLLGUARD_* variable from the caller, in an empty folder; a file holds the command line, the exit
code, stdout and stderr, log lines' timestamps removed. Issue 39 item 3 was checked with it:
every --help byte for byte the same.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rollguard.agent.cli import build_parser as agent
from rollguard.certs.cli import build_parser as certs
from rollguard.roller.cli import build_parser as roller
from rollguard.spark.cli import build_parser as report

TLS = ["--cert", "c", "--key", "k", "--cacert", "ca"]
PLAN = ["rollguard", "plan", "--inventory", "i.yaml", "--bootstrap", "localhost:9092", *TLS]
CONNECT = ["rollguard", "connect", "status", "--connect-url", "http://x:1"]
AGENT = ["rollguard-agent", *TLS]
REPORT = ["rollguard-report", "--dataset", "d", "--out", "o"]
# Each: a bad value on a flag and in its variable, out of range, unknown, renamed, ignored.
BAD: dict[str, tuple[list[str], dict[str, str]]] = {
    "plan-flag": ([*PLAN, "--operation-timeout", "5x"], {}),
    "plan-variable": (PLAN, {"ROLLGUARD_OPERATION_TIMEOUT": "5x"}),
    "plan-unknown": ([*PLAN, "--opertion-timeout", "5m"], {}),
    "plan-renamed": ([*PLAN, "--operation-timeout-ms", "300000"], {}),
    "plan-renamed-variable": (PLAN, {"ROLLGUARD_OPERATION_TIMEOUT_MS": "1500"}),
    "plan-ignored": ([*PLAN, "--poll-interval", "1s"], {}),
    "plan-retry": ([*PLAN, "--retry-jitter-factor", "2"], {}),
    "plan-retry-variable": (PLAN, {"ROLLGUARD_RETRY_INITIAL_BACKOFF_MS": "abc"}),
    "plan-output-variable": (PLAN, {"ROLLGUARD_OUTPUT": "xml"}),
    "state-retry": (["rollguard", "state", "--retry-max-retries", "-1", "https://a:1"], {}),
    "connect-flag": ([*CONNECT, "--timeout", "5x"], {}),
    "connect-variable": (CONNECT, {"ROLLGUARD_CONNECT_TIMEOUT": "5x"}),
    "connect-legacy-variable": (CONNECT, {"ROLLGUARD_TIMEOUT": "5x"}),
    "agent-flag": ([*AGENT, "--timeline-retention", "5x"], {}),
    "agent-variable": (AGENT, {"ROLLGUARD_AGENT_TIMELINE_RETENTION": "5x"}),
    "agent-listen": ([*AGENT, "--listen", "nohost"], {}),
    "agent-unknown": ([*AGENT, "--lissten", "x:1"], {}),
    "certs-flag": (["rollguard-certs", "init-ca", "--days", "5x"], {}),
    "certs-unknown": (["rollguard-certs", "init-ca", "--dayz", "5"], {}),
    "report-choice": ([*REPORT, "--output", "xml"], {}),
    "report-number": ([*REPORT, "--shuffle-partitions", "x"], {}),
    "pause-required": (["rollguard", "roll", "pause"], {}),
}


def commands(parser: argparse.ArgumentParser, argv: list[str]) -> Iterator[list[str]]:
    yield argv
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, [*argv, name])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--bin", type=Path, default=Path(sys.executable).parent)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {"bad-" + name: run for name, run in BAD.items()}
    scripts = {"rollguard": roller, "rollguard-agent": agent, "rollguard-certs": certs,
               "rollguard-report": report}  # fmt: skip
    found = [[s, *argv] for s, build in scripts.items() for argv in commands(build(), [])]
    for argv in [*found, ["rollguard", "roll", "pause"], ["rollguard", "roll", "resume"]]:
        runs["help-" + "-".join(argv)] = ([*argv, "--help"], {})
    base = {k: v for k, v in os.environ.items() if not k.startswith("ROLLGUARD")}
    with tempfile.TemporaryDirectory() as empty:
        for name, (argv, environ) in runs.items():
            env = {**base, "COLUMNS": "100", **environ}
            command = [str(args.bin / argv[0]), *argv[1:]]
            done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=empty,
                                  timeout=120, check=False)  # fmt: skip
            stderr = re.sub(r"^\d{4}-\d\d-\d\dT[\d:.]+Z ", "", done.stderr, flags=re.MULTILINE)
            (args.out / name).write_text(
                f"$ {' '.join(argv)} {environ or ''}\nexit {done.returncode}\n"
                f"--- stdout\n{done.stdout}--- stderr\n{stderr}"
            )
    print(f"{len(runs)} runs in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
