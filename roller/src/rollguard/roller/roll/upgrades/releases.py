"""What each Kafka release brings to a cluster's finalized features, and Kafka's rules for
raising and lowering them (pure data and rules; no I/O).

Read from Kafka 4.4.0's own classes (`MetadataVersion`: each level's name and whether it changed
the metadata; `kafka-features.sh version-mapping --release-version 4.N`: each release's levels),
and checked against that tool in tests/real/test_real_kafka_oldest.py. A release rollguard does not
know yet (newer than the table) is allowed to run any metadata.version the table knows: Kafka
never drops one within a major version.

The trap this module is here for (KAFKA-21426, open): `kafka-features.sh upgrade
--release-version X` raises `kraft.version` too, which turns a static controller quorum
(`controller.quorum.voters`) into a dynamic one, irreversibly. `finalize_plan` sets each feature
by name and leaves `kraft.version` where it is unless asked for it by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "KRAFT_VERSION",
    "METADATA_VERSION",
    "TURNS_ON",
    "FeatureChange",
    "UnknownRelease",
    "finalize_plan",
    "kafka_version",
    "metadata_name",
    "release_levels",
    "software_downgrade",
    "target_refusal",
]

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

# metadata.version levels from 3.3-IV3 (7, the least Kafka 4.x runs) on: (name, whether this
# level changed the metadata, which makes a downgrade across it lose data: Kafka refuses it
# unless unsafe).
METADATA_LEVELS: dict[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True),
    8: ("3.4-IV0", True),
    9: ("3.5-IV0", False),
    10: ("3.5-IV1", False),
    11: ("3.5-IV2", True),
    12: ("3.6-IV0", False),
    13: ("3.6-IV1", True),
    14: ("3.6-IV2", True),
    15: ("3.7-IV0", True),
    16: ("3.7-IV1", False),
    17: ("3.7-IV2", True),
    18: ("3.7-IV3", False),
    19: ("3.7-IV4", False),
    20: ("3.8-IV0", False),
    21: ("3.9-IV0", False),
    22: ("4.0-IV0", False),
    23: ("4.0-IV1", True),
    24: ("4.0-IV2", False),
    25: ("4.0-IV3", False),
    26: ("4.1-IV0", False),
    27: ("4.1-IV1", False),
    28: ("4.2-IV0", False),
    29: ("4.2-IV1", False),
    30: ("4.3-IV0", True),
    31: ("4.4-IV0", False),
    32: ("4.4-IV1", True),
    33: ("4.4-IV2", True),
}

# Each release's levels, as `kafka-features.sh version-mapping --release-version 4.N` prints
# them (Kafka 4.4.0's tool). metadata.version's is the highest its software runs.
RELEASES: dict[tuple[int, int], dict[str, int]] = {
    (4, 0): {
        "metadata.version": 25,
        "kraft.version": 1,
        "transaction.version": 2,
        "group.version": 1,
        "eligible.leader.replicas.version": 0,
        "share.version": 0,
        "streams.version": 0,
    },
    (4, 1): {
        "metadata.version": 27,
        "kraft.version": 1,
        "transaction.version": 2,
        "group.version": 1,
        "eligible.leader.replicas.version": 1,
        "share.version": 0,
        "streams.version": 0,
    },
    (4, 2): {
        "metadata.version": 29,
        "kraft.version": 1,
        "transaction.version": 2,
        "group.version": 1,
        "eligible.leader.replicas.version": 1,
        "share.version": 1,
        "streams.version": 1,
    },
    (4, 3): {
        "metadata.version": 30,
        "kraft.version": 1,
        "transaction.version": 2,
        "group.version": 1,
        "eligible.leader.replicas.version": 1,
        "share.version": 1,
        "streams.version": 1,
    },
    (4, 4): {
        "metadata.version": 33,
        "kraft.version": 1,
        "transaction.version": 2,
        "group.version": 1,
        "eligible.leader.replicas.version": 1,
        "share.version": 2,
        "streams.version": 1,
    },
}

_RELEASE = re.compile(r"([0-9]+)\.([0-9]+)(?:\.[0-9]+)?(?:-[0-9A-Za-z.]+)?")


# A Kafka release as Kafka names it (`4.4.0`, `4.1.0-rc2`): what a node's app-info reports.
KAFKA_RELEASE = re.compile(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(-[0-9A-Za-z.]{1,20})?")


def kafka_version(text: str) -> str:
    text = text.strip()
    if not KAFKA_RELEASE.fullmatch(text):
        raise ValueError(f"{text!r}: a Kafka version is MAJOR.MINOR.PATCH, such as 4.4.0")
    return text


class UnknownRelease(ValueError):
    """A version rollguard has no levels for (older than 4.0, or not a version)."""


def _minor(version: str) -> tuple[int, int]:
    found = _RELEASE.fullmatch(version.strip())
    if found is None:
        raise UnknownRelease(f"{version!r} is not a Kafka version")
    return int(found[1]), int(found[2])


def release_levels(version: str) -> dict[str, int]:
    """The feature levels of Kafka `version`'s release (4.4.0 -> 4.4's). UnknownRelease for
    one the table does not have (a release newer than it: its levels are not known yet)."""
    minor = _minor(version)
    if minor not in RELEASES:
        known = ", ".join(f"{a}.{b}" for a, b in RELEASES)
        raise UnknownRelease(
            f"Kafka {version}: rollguard knows the feature levels of releases {known} only"
        )
    return dict(RELEASES[minor])


def metadata_name(level: int) -> str:
    """`4.4-IV2 (33)`; the level alone for one the table does not know."""
    known = METADATA_LEVELS.get(level)
    return f"{known[0]} ({level})" if known else f"level {level}"


def _max_metadata(version: str) -> int | None:
    """The highest metadata.version Kafka `version`'s software runs; None: newer than the table
    (it runs every level the table knows). UnknownRelease for one older than 4.0."""
    minor = _minor(version)
    if minor in RELEASES:
        return RELEASES[minor][METADATA_VERSION]
    if minor > max(RELEASES):
        return None
    raise UnknownRelease(
        f"Kafka {version} is older than 4.0, the oldest release rollguard rolls onto"
    )


# The least metadata.version Kafka 4.x runs (3.3-IV3): an older cluster goes through 3.9 first.
MIN_METADATA_4X = 7


def target_refusal(finalized: Mapping[str, int], target: str) -> str | None:
    """Why Kafka `target` cannot run this cluster, or None when it can: its finalized
    metadata.version is higher than that software knows (a rollback after a finalize), or lower
    than 4.x runs (an upgrade path Kafka does not support). UnknownRelease for a target older
    than 4.0."""
    level = finalized.get(METADATA_VERSION)
    top = _max_metadata(target)
    if level is not None and level < MIN_METADATA_4X:
        return (
            f"the cluster's finalized metadata.version is {metadata_name(level)}, and Kafka 4.x "
            f"runs {metadata_name(MIN_METADATA_4X)} or later: upgrade to Kafka 3.9 and finalize "
            "its metadata.version first (Kafka's upgrade notes)"
        )
    if level is None or top is None or level <= top:
        return None
    return (
        f"the cluster's finalized metadata.version is {metadata_name(level)}, and Kafka "
        f"{target} runs {metadata_name(top)} at most: a node on it would not start (a "
        "finalized metadata.version is lowered only with kafka-features.sh downgrade, and not "
        "across a level that changed the metadata)"
    )


def software_downgrade(before: int, after: int) -> tuple[bool, list[str]]:
    """Whether metadata.version can come back from `after` to `before` (and so the old software
    run the cluster again), by Kafka's rule: not across a level that changed the metadata.
    Returns (possible, the levels in between that changed it)."""
    changed = [
        metadata_name(level)
        for level in range(before + 1, after + 1)
        if METADATA_LEVELS.get(level, ("", True))[1]
    ]
    return not changed, changed


# What raising each feature turns on (said beside each change a finalize makes, in its dry run
# too): for clients, what they may then use; for the cluster, how it behaves. From Kafka's own
# documentation and KIPs.
TURNS_ON = {
    METADATA_VERSION: "the release's metadata format: the features below that need it; the "
    "old software may no longer read the metadata (said below)",
    KRAFT_VERSION: "a dynamic controller quorum (KIP-853): controllers added and removed "
    "with kafka-metadata-quorum; a static quorum cannot come back",
    "group.version": "the consumer rebalance protocol (KIP-848): consumers that set "
    "group.protocol=consumer rebalance on the brokers, without stopping the whole group",
    "transaction.version": "transactions version 2 (KIP-890): producers check each "
    "transaction's epoch on the broker, closing a window for duplicates and hanging "
    "transactions",
    "eligible.leader.replicas.version": "eligible leader replicas (KIP-966): a replica out of "
    "the ISR but with every acknowledged record may be elected leader; min.insync.replicas "
    "becomes a cluster-level setting as well",
    "share.version": "share groups (KIP-932, queues for Kafka): consumers of a share group "
    "take records one by one, acknowledged each, from the same partitions",
    "streams.version": "the Kafka Streams rebalance protocol (KIP-1071): Streams applications "
    "that set group.protocol=streams are assigned their tasks by the brokers",
}


@dataclass(frozen=True, slots=True)
class FeatureChange:
    """One feature of a finalize: its finalized level now (0: not finalized) and the target's."""

    feature: str
    current: int
    target: int
    skipped: str = ""  # why it is left where it is ("" when it changes or already is there)

    @property
    def changes(self) -> bool:
        return not self.skipped and self.target > self.current

    def describe(self) -> str:
        def level(value: int) -> str:
            return metadata_name(value) if self.feature == METADATA_VERSION else str(value)

        if self.skipped:
            return f"{self.feature}: {level(self.current)}, left as it is ({self.skipped})"
        if not self.changes:
            return (
                f"{self.feature}: {level(self.current)}, already at {level(self.target)} or above"
            )
        said = f"{self.feature}: {level(self.current)} -> {level(self.target)}"
        meaning = TURNS_ON.get(self.feature)
        return f"{said}: turns on {meaning}" if meaning else said


def finalize_plan(
    finalized: Mapping[str, int],
    supported: Mapping[str, tuple[int, int]],
    version: str,
    *,
    include: frozenset[str] = frozenset(),
) -> list[FeatureChange]:
    """Each feature of release `version`, from its finalized level to the release's, set by
    name; never lowered; `kraft.version` left as it is unless named in `include`.
    `supported`: each feature's range the cluster's nodes support (ApiVersions): a level
    outside it is refused by Kafka, so it is refused here first (ValueError naming it)."""
    changes = []
    for feature, target in release_levels(version).items():
        current = finalized.get(feature, 0)
        if feature == KRAFT_VERSION and feature not in include:
            skipped = (
                "raising it turns a static controller quorum dynamic, for good (KAFKA-21426): "
                "name it to raise it"
            )
            changes.append(FeatureChange(feature, current, target, skipped))
            continue
        if target > current and feature in supported and target > supported[feature][1]:
            low, high = supported[feature]
            raise ValueError(
                f"{feature} {target} is not supported by every node (they support {low} to "
                f"{high}): is every node on Kafka {version}?"
            )
        changes.append(FeatureChange(feature, current, target))
    return changes
