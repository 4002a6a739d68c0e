"""Kafka's own view of the cluster, through the Admin API (kafka-python).

One observation per poll of the roll: every topic's partitions with replicas and ISR (internal
topics included: `__consumer_offsets` at min ISR stops every consumer group on it), each topic's
effective `min.insync.replicas`, the partition reassignments in flight, the KRaft quorum (leader
and each voter's last caught-up time) with the cluster's own
`controller.quorum.fetch.timeout.ms`, the active controller and each broker's rack (DescribeCluster,
for batches by rack); and, after a batch, preferred leader elections (ElectLeaders); and, for the
consumer-lag gate, a consumer group's lag (OffsetFetch against ListOffsets). kafka-python's
admin client is blocking, so calls run in a worker thread; its errors are translated here into
`AdminApiError`.

kafka-python keeps trying a bootstrap server that refuses connections until its bootstrap
timeout (10 s here), so a `plan` against a closed port once sat silent for six attempts of ten
seconds. Before a new admin client is made, each bootstrap server is connected to once: when
every one refuses or does not resolve, the attempt fails at once, saying so; anything else (a
host that does not answer) is left to the client and its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.roller.kafka_results import broker_racks, cluster_view
from rollguard.roller.model import DEFAULT_QUORUM_FETCH_TIMEOUT_MS, ClusterView
from rollguard.shared.errors import ConfigError, RetryLater
from rollguard.shared.javaprops import PropertiesError, parse_properties

__all__ = [
    "AdminApiError",
    "Features",
    "KafkaObserver",
    "LagUnknown",
    "cluster_view",
    "read_client_properties",
]

logger = logging.getLogger(__name__)

# Client properties (Java style, as in Kafka's client.properties) and kafka-python's names.
PROPERTY_NAMES = {
    "security.protocol": "security_protocol",
    "ssl.truststore.location": None,  # JKS is Java-only: use ssl.ca.location (PEM)
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "request.timeout.ms": "request_timeout_ms",
}


class AdminApiError(RetryLater):
    """The Admin API could not be used; the roller cannot prove a restart safe."""


class LagUnknown(RetryLater):
    """A consumer group's lag cannot be told from what Kafka answered (no committed offsets:
    an unknown group, or one that never committed)."""


def read_client_properties(path: Path) -> dict[str, Any]:
    """kafka-python settings from a Java properties file, read as Java reads it (a JAAS
    configuration continued over lines with `\\`, `:` as a separator, escapes:
    `shared.javaprops`); ConfigError naming the line and the key."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--kafka-properties {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--kafka-properties {path}: not UTF-8 text (byte {exc.start})") from None
    try:
        found = parse_properties(text)
    except PropertiesError as exc:
        raise ConfigError(f"--kafka-properties {path}:{exc.line}: {exc.problem}") from None
    settings: dict[str, Any] = {}
    for entry in found:
        key, value, number = entry.key, entry.value.strip(), entry.line
        if key not in PROPERTY_NAMES:
            raise ConfigError(
                f"--kafka-properties {path}:{number}: {key} is not supported "
                f"(supported: {', '.join(sorted(PROPERTY_NAMES))})"
            )
        name = PROPERTY_NAMES[key]
        if name is None:
            raise ConfigError(
                f"--kafka-properties {path}:{number}: {key} (JKS) is not "
                "supported; give a PEM CA with ssl.ca.location"
            )
        if name == "ssl_check_hostname":
            settings[name] = value.lower() == "https"
        elif name == "request_timeout_ms":
            try:
                settings[name] = int(value)
            except ValueError:
                raise ConfigError(
                    f"--kafka-properties {path}:{number}: {key} {value!r} is not a whole number"
                ) from None
        else:
            settings[name] = value
    return settings


QUORUM_FETCH_TIMEOUT = "controller.quorum.fetch.timeout.ms"
CONNECT_CHECK_TIMEOUT = 2.0  # seconds for the TCP check of one bootstrap server


def refused_everywhere(bootstrap: str, timeout: float = CONNECT_CHECK_TIMEOUT) -> str | None:
    """Why no bootstrap server can be reached at all: every one refused the connection or has
    no address. None as soon as one accepts, or when one could not say (timed out): the client
    then tries for its own timeout."""
    reasons = []
    for server in (s.strip() for s in bootstrap.split(",")):
        host, _, port = server.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return None
        except ConnectionRefusedError:
            reasons.append(f"{server} refused the connection")
        except socket.gaierror as exc:
            reasons.append(f"{server} does not resolve ({exc.strerror or exc})")
        except (OSError, ValueError):
            return None
    return "; ".join(reasons) or None


@dataclass(frozen=True, slots=True)
class Features:
    """The cluster's finalized feature levels, and each feature's range its node supports."""

    finalized: dict[str, int]
    supported: dict[str, tuple[int, int]]


class KafkaObserver:
    def __init__(
        self, bootstrap: str, settings: Mapping[str, Any] | None = None, *, timeout_ms: int = 10000
    ) -> None:
        self.bootstrap = bootstrap
        self.settings = dict(settings or {})
        self.settings.setdefault("request_timeout_ms", timeout_ms)
        # kafka-python waits 30 s for a bootstrap by default; one pass should not.
        self.settings.setdefault("bootstrap_timeout_ms", timeout_ms)
        self._admin: Any = None
        self._fetch_timeout_ms: int | None = None  # read once: a static broker setting
        self._reassignments_supported = True
        self._warned_fetch_timeout = False

    @classmethod
    def from_file(cls, bootstrap: str, properties: Path | None) -> KafkaObserver:
        """An observer with the client settings of `--kafka-properties` (None: none)."""
        return cls(bootstrap, read_client_properties(properties) if properties else None)

    def _client(self) -> Any:
        from kafka import KafkaAdminClient

        if self._admin is None:
            self._admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap.split(","), client_id="rollguard", **self.settings
            )
        return self._admin

    @contextlib.contextmanager
    def _library(self, what: str, *, check: bool = True) -> Iterator[Any]:
        """The admin client for one call into kafka-python, whose errors (whatever it raises:
        the library's boundary) become AdminApiError naming `what`, the client closed so that
        the next call reconnects (a stale connection to a restarted broker or controller).
        `check`: without a client yet, fail at once when every bootstrap server refuses."""
        from kafka.errors import KafkaError

        if check and self._admin is None:
            refused = refused_everywhere(self.bootstrap)
            if refused is not None:
                raise AdminApiError(f"Kafka Admin API at {self.bootstrap}: {refused}")
        try:
            yield self._client()
        except Exception as exc:
            self.close()
            text = str(exc) if isinstance(exc, KafkaError | OSError) else repr(exc)
            raise AdminApiError(f"{what} at {self.bootstrap}: {text}") from exc

    def calling(self, what: str) -> contextlib.AbstractContextManager[Any]:
        """The admin client for another adapter's calls (the roll canary's topic), blocking,
        its errors translated as this one's are (AdminApiError naming `what`)."""
        return self._library(what)

    def _observe(self) -> ClusterView:
        from kafka.admin import ConfigResource, ConfigResourceType
        from kafka.errors import KafkaError

        with self._library("Kafka Admin API") as admin:
            # Internal topics included: their partitions go below min ISR like any other.
            topics = list(admin.describe_topics())
            resources = [
                ConfigResource(
                    ConfigResourceType.TOPIC, t["name"], configs={"min.insync.replicas": None}
                )
                for t in topics
            ]
            configs = admin.describe_configs(resources, config_filter="all") if resources else {}
            min_isr = {}
            for name, values in configs.get("topic", {}).items():
                entry = values.get("min.insync.replicas")
                if entry is not None and entry.get("value") is not None:
                    min_isr[name] = int(entry["value"])
            try:
                quorum = admin.describe_metadata_quorum()
            except KafkaError as exc:  # ZooKeeper-era clusters have no KRaft quorum
                logger.debug("no KRaft quorum: %s", exc)
                quorum = None
            cluster = admin.describe_cluster()
            controller = cluster.get("controller_id")
            reassignments = self._reassignments(admin)
            fetch_timeout = self._quorum_fetch_timeout(admin, cluster)
        return cluster_view(
            topics,
            min_isr,
            quorum,
            controller,
            reassignments,
            fetch_timeout,
            broker_racks(cluster),
        )

    def _reassignments(self, admin: Any) -> Mapping[Any, Mapping[str, Any]]:
        from kafka.errors import IncompatibleBrokerVersion, UnsupportedVersionError

        if not self._reassignments_supported:
            return {}
        try:
            return dict(admin.list_partition_reassignments())
        except (IncompatibleBrokerVersion, UnsupportedVersionError) as exc:
            # Kafka before 2.4 has no ListPartitionReassignments: it cannot be seen, say so.
            logger.warning(
                "the cluster cannot list partition reassignments (%s); a reassignment in "
                "flight will not hold the roll",
                exc,
            )
            self._reassignments_supported = False
            return {}

    def _quorum_fetch_timeout(self, admin: Any, cluster: Mapping[str, Any]) -> int:
        """`controller.quorum.fetch.timeout.ms` from a broker's configuration, read once; Kafka's
        default (with a warning) when the cluster does not say."""
        from kafka.admin import ConfigResource, ConfigResourceType
        from kafka.errors import KafkaError

        if self._fetch_timeout_ms is not None:
            return self._fetch_timeout_ms
        brokers = sorted(
            b.get("broker_id", b.get("node_id"))
            for b in cluster.get("brokers") or []
            if not b.get("is_fenced")
        )
        for broker in brokers:  # a broker resource is answered by that broker: it may be down
            resource = ConfigResource(
                ConfigResourceType.BROKER, str(broker), configs={QUORUM_FETCH_TIMEOUT: None}
            )
            try:
                configs = admin.describe_configs([resource], config_filter="all")
                entry = configs.get("broker", {}).get(str(broker), {}).get(QUORUM_FETCH_TIMEOUT)
                value = int(entry["value"]) if entry and entry.get("value") else None
            except (KafkaError, ValueError, TypeError) as exc:
                logger.debug("cannot read %s from broker %s: %s", QUORUM_FETCH_TIMEOUT, broker, exc)
                continue
            if value is not None and value > 0:
                self._fetch_timeout_ms = value
                return value
        if not self._warned_fetch_timeout:
            self._warned_fetch_timeout = True
            logger.warning(
                "the cluster did not report %s; using Kafka's default %d ms",
                QUORUM_FETCH_TIMEOUT,
                DEFAULT_QUORUM_FETCH_TIMEOUT_MS,
            )
        return DEFAULT_QUORUM_FETCH_TIMEOUT_MS

    async def observe(self) -> ClusterView:
        return await asyncio.to_thread(self._observe)

    def _elect(self, partitions: Sequence[tuple[str, int]]) -> None:

        wanted: dict[str, list[int]] = {}
        for topic, index in partitions:
            wanted.setdefault(topic, []).append(index)
        with self._library("ElectLeaders", check=False) as admin:
            # Preferred (0). A partition already led by its preferred replica is not an error.
            admin.elect_leaders(0, wanted)

    def _consumer_lag(self, group: str) -> int:
        from kafka.admin import OffsetSpec
        from kafka.errors import GroupIdNotFoundError

        lag: int | None = None
        with self._library("Kafka Admin API") as admin:
            try:
                committed = admin.list_group_offsets({group: None}).get(group) or {}
                # -1: a partition the group holds no offset for (OffsetFetch lists it on request)
                positions = {tp: meta.offset for tp, meta in committed.items() if meta.offset >= 0}
                if positions:
                    wanted = {tp: OffsetSpec.LATEST for tp in positions}
                    latest = admin.list_partition_offsets(wanted)
                    # A committed offset past the end (a truncated log) is no lag, not negative.
                    lag = sum(max(0, int(latest[tp].offset) - at) for tp, at in positions.items())
            except GroupIdNotFoundError:  # OffsetFetch v9+; before, an unknown group has none
                lag = None
        if lag is None:
            raise LagUnknown("no committed offsets (an unknown group, or one that never committed)")
        return lag

    async def consumer_lag(self, group: str) -> int:
        """`group`'s lag now: end offsets less committed offsets, summed over the partitions it
        committed to (the consumer-lag gate's reader); AdminApiError, or LagUnknown when the
        group has no committed offsets."""
        return await asyncio.to_thread(self._consumer_lag, group)

    async def elect_preferred(self, partitions: Sequence[tuple[str, int]]) -> None:
        """A preferred leader election of `partitions` (ElectLeaders); AdminApiError."""
        await asyncio.to_thread(self._elect, partitions)

    def _features(self) -> Features:

        with self._library("DescribeFeatures") as admin:
            found = admin.describe_features()
        finalized = {
            name: int(entry["finalized"][1])
            for name, entry in found.items()
            if "finalized" in entry
        }
        supported = {
            name: (int(entry["supported"][0]), int(entry["supported"][1]))
            for name, entry in found.items()
            if "supported" in entry
        }
        return Features(finalized, supported)

    async def features(self) -> Features:
        """The cluster's finalized feature levels and the ranges the answering node supports
        (ApiVersions v3+, as `kafka-features.sh describe`); AdminApiError."""
        return await asyncio.to_thread(self._features)

    def _update_features(self, levels: Mapping[str, int], validate_only: bool) -> dict[str, str]:

        with self._library("UpdateFeatures", check=False) as admin:
            answer = admin.update_features(dict(levels), validate_only=validate_only)
        return {str(name): str(said) for name, said in answer.items()}

    async def update_features(
        self, levels: Mapping[str, int], *, validate_only: bool = False
    ) -> dict[str, str]:
        """Raise each feature to its level (UpdateFeatures, to the active controller, as an
        upgrade: never lowered); each feature's answer, "OK" or Kafka's error. With
        `validate_only`, Kafka checks and changes nothing."""
        return await asyncio.to_thread(self._update_features, levels, validate_only)

    def close(self) -> None:
        if self._admin is not None:
            try:
                self._admin.close()
            finally:
                self._admin = None
