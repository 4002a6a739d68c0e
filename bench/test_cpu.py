"""Where a `make test` run's CPU goes, by kind of process (a Kafka JVM, an agent, Spark...).

    sudo .venv/bin/python bench/test_cpu.py record DIR   # until SIGTERM or Ctrl-C, beside a run
    .venv/bin/python bench/test_cpu.py report DIR [--top 40]

`record` turns on the kernel's process accounting (acct(2): one record per exited process, with
its user and system CPU, written by the kernel, so no process is missed however short) into
DIR/acct, and reads every new process's command line from /proc twice a second into
DIR/names.json, to tell one `java` from another (the accounting record has only the 15-character
command name). `report` joins the two by pid: CPU seconds and process count per kind, biggest
first. Processes still running when `record` stops are not counted (stop it after the run).
Needs root (acct(2)), Linux. `ROLLGUARD_TEST_CPU=DIR` (tests/conftest.py) gives the other view: per
test file.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import re
import signal
import struct
import sys
import time
from pathlib import Path

# struct acct_v3 (linux/acct.h): 64 bytes; comp_t times in AHZ (100) ticks.
RECORD = 64
HEADER = struct.Struct("<bbHIIIIIIfHH")  # flag, version, tty, exit, uid, gid, pid, ppid, btime,
#                                          etime, utime, stime
AHZ = 100
JAVA_KINDS = (
    ("kafka.Kafka", "java: Kafka node"),
    ("ConnectDistributed", "java: Kafka Connect worker"),
    ("org.apache.spark", "java: Spark"),
    ("TestBroker", "java: test broker"),
    ("RollguardJmx", "java: agent's JMX reader"),
    ("jmxquery", "java: agent's jmxquery"),
    ("StorageTool", "java: kafka-storage format"),
    ("kafka.tools", "java: Kafka tools"),
    ("org.apache.kafka.tools", "java: Kafka tools"),
    ("maven", "java: Maven"),
)


def kind(command: list[str]) -> str:
    """What a process is, from its command line."""
    line = " ".join(command)
    name = os.path.basename(command[0])
    if name == "java":
        return next((k for key, k in JAVA_KINDS if key in line), "java: other")
    if "spark-class" in line:  # bash that execs Spark's JVM: seen before the exec
        return "java: Spark"
    if name.startswith("python") or name in ("pytest", "rollguard", "rollguard-agent"):
        if "rollguard-agent" in line:
            return "python: rollguard-agent"
        if "execnet" in line or "exec(eval(sys.stdin.readline()))" in line:
            return "python: pytest worker"
        found = re.search(r"/rollguard(?:-\w+)? (\w[\w-]*)", line)
        if found:
            return f"python: rollguard {found.group(1)}"
        if "realclients" in line:
            return "python: ISR sampler"
        return "python: other"
    return name


def record(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    accounting = folder / "acct"
    accounting.write_bytes(b"")
    if libc.acct(str(accounting).encode()) != 0:
        print(f"test_cpu: acct(2) refused: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 1
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    names: dict[int, tuple[str, str]] = {}
    try:
        while not stop:
            for entry in os.listdir("/proc"):
                if not entry.isdigit() or int(entry) in names:
                    continue
                try:
                    raw = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                command = [part.decode(errors="replace") for part in raw if part]
                if command:
                    names[int(entry)] = (kind(command), " ".join(command)[:300])
            time.sleep(0.5)
    finally:
        libc.acct(None)
        (folder / "names.json").write_text(json.dumps(names))
    return 0


def expand(value: int) -> int:
    """comp_t: a 13-bit mantissa and a 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * (value >> 13))


def report(folder: Path, top: int) -> int:
    names = {int(k): v for k, v in json.loads((folder / "names.json").read_text()).items()}
    data = (folder / "acct").read_bytes()
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for offset in range(0, len(data) - RECORD + 1, RECORD):
        fields = HEADER.unpack_from(data, offset)
        pid, user, system = fields[6], fields[10], fields[11]
        command = data[offset + 48 : offset + RECORD].split(b"\0")[0].decode(errors="replace")
        what = names[pid][0] if pid in names else command
        totals[what][0] += (expand(user) + expand(system)) / AHZ
        totals[what][1] += 1
    total = sum(cpu for cpu, _ in totals.values())
    print(f"{total:.0f} CPU seconds in {sum(n for _, n in totals.values()):.0f} processes")
    for what, (cpu, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{cpu:8.1f} s {100 * cpu / total:5.1f} % {count:6.0f}  {what}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("record").add_argument("folder", type=Path)
    shown = sub.add_parser("report")
    shown.add_argument("folder", type=Path)
    shown.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    if args.command == "record":
        return record(args.folder)
    return report(args.folder, args.top)


if __name__ == "__main__":
    sys.exit(main())
