"""`rollguard features` and `rollguard finalize`: the last step of a Kafka upgrade, on its own.

    rollguard features --bootstrap B [--kafka-version V]
        each feature's finalized level and the range the cluster supports (DescribeFeatures);
        with a version, that release's level beside it
    rollguard finalize --kafka-version V --bootstrap B (--inventory F | --namespace NS ...)
                       --cert --key --cacert [--dry-run] [--include-feature kraft.version]
        every node RUNNING and on V by its agent (a controller-only node: started), or nothing
        is done; then each feature set by name to V's release level (`releases.finalize_plan`:
        never lowered, `kraft.version` only when named), checked by Kafka first
        (`validate_only`), and read back from the cluster

Kafka's docs ask for a pause between the roll and this step, to verify the cluster: once
metadata.version has crossed a level that changed the metadata, the old software cannot run
the cluster again. `--dry-run` says, before anything changes, whether it could.

Exit codes: 0 done (or nothing to do), 1 refused (a node not ready or not on the version, a
level Kafka refused, a level not read back), 2 bad flags, variables or files, 3 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from rollguard.roller.agent_client import AgentReport
from rollguard.roller.kafka_admin import Features, KafkaObserver
from rollguard.roller.model import BROKER_STATE_MISSING, AgentAnswer, Node, kafka_build
from rollguard.roller.options import (
    ENV_PREFIX,
    AgentOptions,
    KafkaOptions,
    OutputOptions,
    PlatformOptions,
)
from rollguard.roller.roll.upgrades.releases import (
    KRAFT_VERSION,
    METADATA_VERSION,
    TURNS_ON,
    FeatureChange,
    UnknownRelease,
    finalize_plan,
    kafka_version,
    metadata_name,
    release_levels,
    software_downgrade,
)
from rollguard.shared.cli import ExitCode, report_failure, run_until_signal
from rollguard.shared.converters import boolean
from rollguard.shared.errors import ConfigError
from rollguard.shared.logs import PROGRESS
from rollguard.shared.retry import RetryStats
from rollguard.shared.settings import Group, option

progress = logging.getLogger(PROGRESS)

FEATURES = Group("features", "the release whose feature levels are wanted")
# Features a finalize leaves where they are unless named (--include-feature).
OPT_IN = frozenset({KRAFT_VERSION})
READ_BACK_S = 30.0  # how long the cluster has to show the new levels (its metadata log)


def _included(text: str) -> frozenset[str]:
    named = frozenset(filter(None, (n.strip() for n in text.split(","))))
    if unknown := sorted(named - OPT_IN):
        raise ValueError(
            f"{', '.join(unknown)}: only {', '.join(sorted(OPT_IN))} is left out unless named"
        )
    return named


@dataclass(frozen=True, kw_only=True)
class FeaturesOptions(KafkaOptions, OutputOptions):
    """`rollguard features`: the Admin API and the output."""

    sections = (FEATURES,)

    kafka_version: str | None = option(
        None,
        kafka_version,
        "show that release's level of each feature beside the cluster's",
        "VERSION",
        group=FEATURES,
    )


@dataclass(frozen=True, kw_only=True)
class FinalizeOptions(AgentOptions, OutputOptions, PlatformOptions, KafkaOptions):
    """`rollguard finalize`: the nodes and their agents, the Admin API, the release."""

    sections = (FEATURES,)

    kafka_version: str = option(
        None,
        kafka_version,
        "the release every node runs: each feature is set to its level",
        "VERSION",
        required=True,
        group=FEATURES,
    )
    dry_run: bool = option(
        "false",
        boolean,
        "show every feature from -> to, Kafka's verdict and whether the old software could run "
        "the cluster afterwards; change nothing (a switch)",
        switch=True,
        group=FEATURES,
    )
    include_feature: frozenset[str] = option(
        "",
        _included,
        "features a finalize leaves where they are unless named: kraft.version (raising it "
        "turns a static controller quorum dynamic, for good)",
        "NAMES",
        group=FEATURES,
    )


def add_parsers(sub: Any) -> None:
    features = sub.add_parser(
        "features",
        help="show the cluster's finalized features and what a release would set",
        description="Show the cluster's finalized features (DescribeFeatures). Example:\n"
        "  rollguard features --bootstrap kafka-0:9092 --kafka-version 4.4.0",
    )
    FeaturesOptions.add_flags(features, ENV_PREFIX)
    features.set_defaults(run=features_command)
    finalize = sub.add_parser(
        "finalize",
        help="after an upgrade: set each feature to the release's level, kraft.version left",
        description="After an upgrade, once the cluster is verified: set each finalized "
        "feature to the release's level, by name (never kraft.version unless named). "
        "Example:\n  rollguard finalize --kafka-version 4.4.0 --inventory nodes.yaml "
        "--bootstrap kafka-0:9092 --cert roller.crt --key roller.key --cacert ca.crt --dry-run",
        # What it needs, as `roll` says it: the flags argparse would show as optional (each
        # can come from its variable instead) are required all the same.
        usage="rollguard finalize --kafka-version VERSION (--inventory FILE | --namespace NS "
        "--selector SELECTOR)\n"
        f"{'':24}--bootstrap SERVERS --cert PATH --key PATH --cacert PATH [options]",
    )
    FinalizeOptions.add_flags(finalize, ENV_PREFIX)
    finalize.set_defaults(run=finalize_command)


def _levels(version: str) -> dict[str, int]:
    try:
        return release_levels(version)
    except UnknownRelease as exc:
        raise ConfigError(str(exc)) from None


# ---- rollguard features -------------------------------------------------------------------


def features_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = FeaturesOptions.load(args, environ, ENV_PREFIX)
    release = _levels(options.kafka_version) if options.kafka_version else None
    return run_until_signal(_features(options, release))


async def _features(options: FeaturesOptions, release: dict[str, int] | None) -> int:
    observer = KafkaObserver.from_file(options.bootstrap, options.kafka_properties)
    try:
        found = await observer.features()
    finally:
        observer.close()
    names = sorted(set(found.finalized) | set(found.supported) | set(release or {}))
    for name in names:
        entry: dict[str, Any] = {
            "feature": name,
            "finalized": found.finalized.get(name, 0),
            "supported": list(found.supported[name]) if name in found.supported else None,
        }
        if release is not None:
            entry["release"] = release.get(name)
        if options.output == "json":
            print(json.dumps(entry))
            continue
        line = f"{name}: finalized {_level(name, entry['finalized'])}"
        if entry["supported"] is not None:
            low, high = entry["supported"]
            line += f", supported {_level(name, low)} to {_level(name, high)}"
        if release is not None and name in release:
            line += f"; Kafka {options.kafka_version}: {_level(name, release[name])}"
        print(line)
    return ExitCode.OK


def _level(feature: str, level: int) -> str:
    return metadata_name(level) if feature == METADATA_VERSION and level else str(level)


# ---- rollguard finalize -------------------------------------------------------------------


def finalize_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    options = FinalizeOptions.load(args, environ, ENV_PREFIX)
    _levels(options.kafka_version)  # a release rollguard has no levels for: exit 2 at once
    stats = RetryStats()
    return run_until_signal(_finalize(options, stats))


def not_ready(node: Node, answer: AgentAnswer | None, version: str) -> str | None:
    """Why `node` keeps a finalize from running, or None: RUNNING on `version` by its agent (a
    controller-only node: started, on `version`)."""
    if answer is None:
        return f"{node.name}: no agent to say what it runs"
    running = kafka_build(answer)
    if isinstance(answer, AgentReport):
        if not answer.report.broker_state.is_ready:
            return f"{node.name}: {answer.report.describe()}"
    elif not (answer.reason == BROKER_STATE_MISSING and not node.is_broker):
        return f"{node.name}: its agent cannot say ({answer.reason}: {answer.message})"
    if running is None:
        return f"{node.name}: its agent does not say which Kafka it runs"
    if running.version != version:
        return f"{node.name} runs Kafka {running.version}, not {version}"
    return None


async def _finalize(options: FinalizeOptions, stats: RetryStats) -> int:
    version = options.kafka_version
    json_output = options.output == "json"
    with ExitStack() as stack:
        agents = options.agent_client(stats)
        platform, _ = options.platform(agents, stack)
        try:
            nodes = await platform.nodes()
            answers = await asyncio.gather(
                *(
                    agents.broker_state(n.agent_url, once=True) if n.agent_url else _none()
                    for n in nodes
                )
            )
        finally:
            await platform.close()
            await agents.aclose()
        refusals = [
            why for n, a in zip(nodes, answers, strict=True) if (why := not_ready(n, a, version))
        ]
        if refusals:
            return report_failure(
                f"not finalizing: every node must be running Kafka {version} first: "
                + "; ".join(refusals),
                ExitCode.FAILED,
                json_output=json_output,
            )
        progress.info("finalize: %d nodes, each running Kafka %s", len(nodes), version)
        observer = KafkaObserver.from_file(options.bootstrap, options.kafka_properties)
        stack.callback(observer.close)
        before = await observer.features()
        try:
            changes = finalize_plan(
                before.finalized, before.supported, version, include=options.include_feature
            )
        except ValueError as exc:
            return report_failure(
                f"not finalizing: {exc}", ExitCode.FAILED, json_output=json_output
            )
        wanted = {c.feature: c.target for c in changes if c.changes}
        verdicts = await observer.update_features(wanted, validate_only=True) if wanted else {}
        refused = {f: said for f, said in verdicts.items() if said != "OK"}
        if options.dry_run or refused:
            _show(changes, verdicts, None, before, options)
            if refused:
                said = "; ".join(f"{f}: {why}" for f, why in refused.items())
                return report_failure(
                    f"Kafka refuses the finalize: {said}", ExitCode.FAILED, json_output=json_output
                )
            return ExitCode.OK
        if wanted:
            answers_ = await observer.update_features(wanted)
            if failed := {f: said for f, said in answers_.items() if said != "OK"}:
                said = "; ".join(f"{f}: {why}" for f, why in failed.items())
                return report_failure(
                    f"Kafka refused: {said}", ExitCode.FAILED, json_output=json_output
                )
        after = await _read_back(observer, wanted)
        _show(changes, verdicts, after, before, options)
        short = {f: lvl for f, lvl in wanted.items() if after.finalized.get(f, 0) < lvl}
        if short:
            said = ", ".join(
                f"{f} {after.finalized.get(f, 0)} (asked {lvl})" for f, lvl in short.items()
            )
            return report_failure(
                f"not read back from the cluster within {READ_BACK_S:g}s: {said}",
                ExitCode.FAILED,
                json_output=json_output,
            )
        return ExitCode.OK


async def _none() -> None:
    return None


async def _read_back(observer: KafkaObserver, wanted: Mapping[str, int]) -> Features:
    """The cluster's features once every one in `wanted` shows its level (a broker learns them
    from the metadata log, a moment after the controller), or as they are after READ_BACK_S."""
    deadline = time.monotonic() + READ_BACK_S
    while True:
        found = await observer.features()
        if all(found.finalized.get(f, 0) >= lvl for f, lvl in wanted.items()):
            return found
        if time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.5)


def _show(
    changes: list[FeatureChange],
    verdicts: Mapping[str, str],
    after: Features | None,
    before: Features,
    options: FinalizeOptions,
) -> None:
    """Each feature from -> to (with Kafka's verdict on a dry run, the level read back after
    a finalize), then whether the old software could run the cluster afterwards."""
    for change in changes:
        entry: dict[str, Any] = {
            "feature": change.feature,
            "from": change.current,
            "to": change.target if change.changes else change.current,
            "changes": change.changes,
        }
        if change.skipped:
            entry["leftOut"] = change.skipped
        if change.changes and change.feature in TURNS_ON:
            entry["turnsOn"] = TURNS_ON[change.feature]
        if change.feature in verdicts:
            entry["kafka"] = verdicts[change.feature]
        if after is not None:
            entry["readBack"] = after.finalized.get(change.feature, 0)
        if options.output == "json":
            print(json.dumps(entry))
        else:
            line = change.describe()
            if "kafka" in entry:
                line += f" (Kafka: {entry['kafka']})"
            if "readBack" in entry:
                line += f"; read back: {_level(change.feature, entry['readBack'])}"
            print(line)
    mv = next((c for c in changes if c.feature == METADATA_VERSION), None)
    if mv is None or not mv.changes:
        return
    possible, changed = software_downgrade(mv.current, mv.target)
    if possible:
        text = (
            f"afterwards the software that ran {metadata_name(mv.current)} can run the cluster "
            "again: no metadata.version between changed the metadata"
        )
    else:
        text = (
            f"afterwards the software that ran {metadata_name(mv.current)} cannot run the "
            f"cluster again: {', '.join(changed)} changed the metadata (a downgrade across "
            "them is refused, or loses metadata)"
        )
    if options.output == "json":
        print(json.dumps({"softwareDowngrade": possible, "changedMetadata": changed}))
    else:
        print(text)


__all__ = ["FeaturesOptions", "FinalizeOptions", "add_parsers", "not_ready"]
