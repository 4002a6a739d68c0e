"""`rollguard-report`'s command line: its options, its exit codes, and how a signal ends it.

    rollguard-report --dataset DIR --out DIR [--master URL]

The options are declared like every rollguard command's, as an `Options` dataclass
(`rollguard.shared.settings`), read from the command line alone: argparse converts them, so a
bad value is its usage error (exit 2). The job itself, what runs in Spark, is
`rollguard.spark.job`, whose `main` (the console script, and what spark-submit runs) is this one.
Exit codes: 0 done, 1 the job failed, 2 bad flags or no dataset, 3 interrupted.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rollguard.shared.cli import ExitCode, Parser
from rollguard.shared.converters import braces, integer, one_of
from rollguard.shared.errors import ConfigError
from rollguard.shared.settings import Options, option
from rollguard.spark.job import find_inputs, run, session

EXIT_FAILED = ExitCode.FAILED
EXIT_CONFIG = ExitCode.USAGE
OUTPUTS = ("text", "json")


@dataclass(frozen=True, kw_only=True)
class ReportOptions(Options):
    dataset: Path = option(None, Path, "folder written by collect", required=True)
    out: Path = option(None, Path, "folder for tables and report", required=True)
    master: str | None = option(
        None, str, "Spark master URL (default: local[*]; under spark-submit, spark-submit's)"
    )
    output: str = option(
        "text",
        one_of(OUTPUTS),
        "the closing summary as text, or json (summary.json's content)",
        braces(OUTPUTS),
    )
    driver_memory: str = option("2g", str, "driver memory in local mode (default: 2g)")
    shuffle_partitions: int = option(
        "0",
        integer(0, 100_000),
        "partitions of the one shuffle (default: 2 per core of the master)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="rollguard-report",
        description="Recovery report from collected agent timelines: tables (Parquet), "
        "summary.json, expectations.json and report.html. Example:\n"
        "  rollguard-report --dataset dataset --out report",
    )
    ReportOptions.add_flags(parser)
    # Which clusters to report on, not a setting of the report: repeatable.
    parser.add_argument("--cluster", action="append", help="only this cluster (repeatable)")
    return parser


class _Interrupted(BaseException):
    """SIGTERM, raised where the driver is (as Python raises KeyboardInterrupt for SIGINT)."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Interrupted


def _interrupted_now(out: Path, signum: int, frame: object) -> None:
    sys.stdout.flush()
    sys.stderr.write(f"rollguard-report: interrupted; {out} is incomplete, run the report again\n")
    sys.stderr.flush()
    os._exit(ExitCode.INTERRUPTED)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 written, 1 the job failed, 2 bad input, 3 interrupted by SIGINT or SIGTERM (Spark's
    jobs cancelled and the session stopped; what is in --out is incomplete: run it again)."""
    args = build_parser().parse_args(argv)
    try:
        options = ReportOptions.load(args)
    except ConfigError as exc:
        print(f"rollguard-report: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    signal.signal(signal.SIGTERM, _on_sigterm)
    # py4j logs the gateway call that an interruption cuts short, with a traceback; the one line
    # below says what happened.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    try:
        return _main(options, args.cluster)
    except (KeyboardInterrupt, _Interrupted):
        print(
            f"rollguard-report: interrupted; {options.out} is incomplete, run the report again",
            file=sys.stderr,
        )
        return ExitCode.INTERRUPTED


def _main(options: ReportOptions, clusters: list[str] | None) -> int:
    try:
        find_inputs(options.dataset)
    except FileNotFoundError as exc:
        print(f"rollguard-report: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        spark = session(options.master, options.driver_memory, options.shuffle_partitions)
    except Exception as exc:  # Java missing, master unreachable: Spark's own words, one line
        print(f"rollguard-report: cannot start Spark: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILED
    # From here a signal ends the process at once, from the handler: an exception raised in the
    # middle of a call to the JVM (PySpark's own SIGINT handler does that) leaves py4j's
    # connection unusable and comes back as a job failure with a traceback logged. Spark's JVM
    # is PySpark's gateway child, which exits when this process's end closes its stdin.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, functools.partial(_interrupted_now, options.out))
    try:
        result = run(spark, options.dataset, options.out, clusters)
    except Exception as exc:
        spark.stop()
        print(f"rollguard-report: the job failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_FAILED
    spark.stop()
    s = result.summary
    if options.output == "json":
        print(json.dumps({**s, "report": str(result.report.resolve())}, default=str))
    else:
        print(
            f"{s['records']} records, {s['episodes']} episodes in {len(s['clusters'])} clusters; "
            f"{s['seconds']:.1f}s; report: {result.report.resolve()}"
        )
    return 0
