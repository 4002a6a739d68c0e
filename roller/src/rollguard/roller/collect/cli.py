"""`rollguard collect`: pull the agents' recovery timelines (and the roller's event logs)
into a Parquet dataset for the report (`rollguard.roller.collect.collector`).

    rollguard collect (--inventory FILE | --namespace NS --selector SEL) --out DIR ...

Every option can also be set as `ROLLGUARD_<OPTION>`. Exit codes: 0 every agent caught up, 1 some
did not (what the others sent is kept), 2 bad flags, variables or files, 3 interrupted (collect
again: cursors are committed per node, nothing is duplicated).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rollguard.roller.model import check_cluster
from rollguard.roller.options import ENV_PREFIX, AgentOptions, OutputOptions, PlatformOptions
from rollguard.shared.cli import ExitCode, run_until_signal
from rollguard.shared.converters import duration_between, integer
from rollguard.shared.errors import ConfigError
from rollguard.shared.retry import RetryStats
from rollguard.shared.settings import option


def _paths(text: str) -> list[Path]:
    return [Path(p.strip()) for p in text.split(",") if p.strip()]


@dataclass(frozen=True, kw_only=True)
class CollectOptions(AgentOptions, OutputOptions, PlatformOptions):
    out: Path = option(
        None,
        Path,
        "dataset folder (created; collect again into the same one)",
        "DIR",
        required=True,
    )
    cluster: str | None = option(
        None,
        check_cluster,
        "cluster name in the dataset (default: the inventory file's stem, or the selector's "
        "strimzi.io/cluster, or the namespace)",
        "NAME",
    )
    events: list[Path] = option(
        "", _paths, "roller event logs: files or --state-dir folders", "PATHS"
    )
    concurrency: int = option("16", integer(1, 1024), "agents pulled at once", "N")
    page_size: int = option("5000", integer(1, 10000), "records per request", "N")
    agent_deadline: float = option(
        "2m",
        duration_between("10ms", "1d"),
        "time one agent may take in a run; what came by then is kept",
        "DURATION",
    )


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser(
        "collect",
        help="pull agents' recovery timelines into a dataset",
        description="Pull the agents' recovery timelines and the roller's event logs into a "
        "Parquet dataset for the report. Example:\n  rollguard collect --inventory prod.yaml "
        "--cert roller.crt --key roller.key --cacert ca.crt --events .rollguard --out dataset",
    )
    CollectOptions.add_flags(parser, ENV_PREFIX)
    parser.set_defaults(run=collect_command)


def _cluster_name(options: CollectOptions) -> str:
    if options.cluster is not None:
        return options.cluster
    try:
        return check_cluster(options.cluster_name())
    except ValueError as exc:
        raise ConfigError(f"{exc}; name the cluster with --cluster") from None


async def _collect(options: CollectOptions, stats: RetryStats) -> int:
    from rollguard.roller.collect.collector import Dataset, collect
    from rollguard.roller.collect.collector import describe as describe_pull

    with ExitStack() as stack:
        agents = options.agent_client(stats)
        platform, _ = options.platform(agents, stack)
        try:
            nodes = await platform.nodes()
            dataset = Dataset(options.out, _cluster_name(options))
            result = await collect(
                agents,
                nodes,
                dataset,
                events=options.events,
                concurrency=options.concurrency,
                page_size=options.page_size,
                deadline=options.agent_deadline,
            )
        finally:
            await agents.aclose()
            await platform.close()
    for node in result.nodes:
        if options.output == "json":
            print(json.dumps({**asdict(node), "expired": [list(e) for e in node.expired]}))
        else:
            print(f"{node.node:<24} {describe_pull(node)}")
    for line in result.events.malformed:
        print(f"rollguard: malformed event skipped: {line}", file=sys.stderr)
    for other, count in sorted(result.events.other_clusters.items()):
        print(
            f"rollguard: {count} events of cluster {other} left out (this is cluster "
            f"{dataset.cluster}; collect them with that cluster's inventory or --cluster)",
            file=sys.stderr,
        )
    records = sum(n.records for n in result.nodes)
    gaps = sum(len(n.expired) for n in result.nodes)
    print(
        f"collected {records} records from {len(result.nodes)} agents "
        f"({len(result.failed)} not caught up: {', '.join(n.node for n in result.failed) or '-'}; "
        f"{gaps} gaps), {result.events.events} roller events from {result.events.files} files, "
        f"into {dataset.root} cluster {dataset.cluster} in {result.seconds:.1f}s; "
        f"{stats.summary()}",
        file=sys.stderr,
    )
    return ExitCode.FAILED if result.failed else 0


def collect_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = CollectOptions.load(args, environ, ENV_PREFIX)
    if importlib.util.find_spec("pyarrow") is None:
        raise ConfigError(
            "rollguard collect writes Parquet with pyarrow, which is not installed: "
            "pip install 'rollguard[collect]'"
        )
    return run_until_signal(_collect(options, RetryStats()))
