"""The roll's canary on Kafka (`rollguard roll --canary TOPIC`): a producer and a consumer on a
topic with a partition led by each broker, for the whole roll, as Strimzi Canary and Xinfra
Monitor do apart from any roller, so that every broker's restart is felt by a client.

The topic, when absent, is created with one partition per broker, the cluster's default
replication (3 at least where there are 3 brokers or more) and its min ISR, each partition's
replicas given at creation (CreateTopics' replica assignment) so that its preferred leader is
its own broker. An existing topic is used as it is, never altered (a wrong shape is said, by
the caller). The producer: acks=all, idempotent, a bounded delivery timeout (a send that cannot
be acknowledged within it fails, where the default of two minutes would hide a breach behind
latency), one send every `every` seconds, each to the next partition in turn. The consumer
reads every partition from where it ended at the start. Both in threads of their own (kafka-
python blocks), with the roller's own client settings (`--kafka-properties`: TLS, SASL); every
kafka-python error is caught here, counted as a failed send or said as the last error, never
raised into the roll.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rollguard.roller.kafka_admin import AdminApiError, KafkaObserver
from rollguard.roller.model import CanaryArrival, CanarySample
from rollguard.roller.roll.canary.ledger import Ledger
from rollguard.roller.roll.canary.topic import CanaryTopic, replication, shape_problem, spread
from rollguard.shared.errors import ConfigError

logger = logging.getLogger(__name__)

DELIVERY_TIMEOUT = 10.0  # seconds: a send not acknowledged within it has failed
REQUEST_TIMEOUT_MS = 5000  # within the delivery timeout, so that a send is retried once at least
OVERDUE = 2  # delivery timeouts a send may stay unanswered before its producer is replaced
TOPIC_AUTHORIZATION_FAILED = 29  # Kafka's error code, in a topic's DescribeTopics answer


class CanaryRefused(ConfigError):
    """Kafka refuses the roller's client an operation the canary needs (its ACLs): a
    configuration to fix before the roll, exit 2 before its first action."""

    def __init__(self, topic: str, operation: str, error: BaseException) -> None:
        where = "the cluster" if operation == "IDEMPOTENT_WRITE" else f"topic {topic}"
        super().__init__(
            f"--canary {topic}: Kafka refuses the roller's client {operation} on {where} "
            f"({type(error).__name__}): the canary needs DESCRIBE, WRITE and READ on its topic "
            "(and CREATE while it is absent); grant them, or roll without --canary"
        )
        self.operation = operation


def _close(producer: Any, timeout: float) -> None:
    """kafka-python's close() flushes first and raises when a send is still unanswered, before
    its own force close: then its sender is told to stop at once."""
    try:
        producer.close(timeout)
    except Exception:
        sender = getattr(producer, "_sender", None)
        if sender is not None:
            with contextlib.suppress(Exception):
                sender.force_close()


def _denied(error: BaseException | None) -> bool:
    """Whether Kafka refused the call for want of an ACL (kafka-python's AuthorizationError)."""
    from kafka.errors import AuthorizationError

    return isinstance(error, AuthorizationError)


class Canary:
    """A producer and a consumer on the canary topic, from `start()` to `stop()`; their
    samples read at any time with `samples()` (thread-safe)."""

    def __init__(
        self,
        admin: KafkaObserver,
        topic: str,
        *,
        every: float = 0.1,
        delivery_timeout: float = DELIVERY_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.admin = admin
        self.topic = topic
        self.every = every
        self.delivery_timeout = delivery_timeout
        self.clock = clock
        self._wall = wall
        self.sends = Ledger(clock)
        self.warm = self.sends.warm  # every partition's first send acknowledged
        self.renewals = 0  # producers replaced for leaving a send unanswered past its bound
        self.last_error: str | None = None
        self.started_at: float | None = None
        self._stop = threading.Event()
        self._consumer_ready = threading.Event()
        self._threads: list[threading.Thread] = []
        self.refused: CanaryRefused | None = None  # the first operation Kafka refused it
        self._doing = "DESCRIBE"  # what `prepare` asks of Kafka now

    # ---- the topic -----------------------------------------------------------------------

    def _prepare(self) -> CanaryTopic:
        from kafka.admin import ConfigResource, ConfigResourceType

        with self.admin.calling(f"the canary topic {self.topic}") as admin:
            cluster = admin.describe_cluster()
            brokers = sorted(
                int(b.get("broker_id", b.get("node_id"))) for b in cluster.get("brokers") or []
            )
            self._doing = "DESCRIBE"
            found = admin.describe_topics([self.topic])
            if any(t.get("error_code") == TOPIC_AUTHORIZATION_FAILED for t in found):
                from kafka.errors import TopicAuthorizationFailedError

                raise CanaryRefused(self.topic, "DESCRIBE", TopicAuthorizationFailedError())
            known = [t for t in found if t.get("error_code", 0) == 0 and t.get("partitions")]
            if known:
                parts = known[0]["partitions"]
                replicas = {p["partition_index"]: list(p["replica_nodes"]) for p in parts}
                width = max((len(r) for r in replicas.values()), default=0)
                problem = shape_problem(replicas, brokers)
                leaders = {p: r[0] for p, r in replicas.items() if r}
                return CanaryTopic(self.topic, len(replicas), width, False, problem, leaders)
            default = None
            resource = ConfigResource(
                ConfigResourceType.BROKER,
                str(brokers[0]),
                configs={"default.replication.factor": None},
            )
            with contextlib.suppress(Exception):  # unreadable: the least below
                said = admin.describe_configs([resource], config_filter="all")
                entry = (
                    said.get("broker", {})
                    .get(str(brokers[0]), {})
                    .get("default.replication.factor")
                )
                default = int(entry["value"])
            assignments = spread(brokers, replication(default, len(brokers)))
            self._doing = "CREATE"
            admin.create_topics({self.topic: {"assignments": assignments}}, wait_for_metadata=True)
        width = len(assignments[0])
        leaders = {p: r[0] for p, r in assignments.items()}
        return CanaryTopic(self.topic, len(assignments), width, True, None, leaders)

    async def lead(self, partitions: Sequence[int]) -> None:
        """A preferred leader election of the topic's `partitions` (ElectLeaders): each led by
        its own broker again, as Kafka's own rebalancing would do minutes later; AdminApiError."""
        await self.admin.elect_preferred([(self.topic, p) for p in partitions])

    def prepare(self) -> CanaryTopic:
        """The topic, found or created (blocking); CanaryRefused when Kafka refuses the
        roller's client its DESCRIBE or CREATE, AdminApiError when it can be neither."""
        try:
            return self._prepare()
        except AdminApiError as exc:
            cause = exc.__cause__
            if isinstance(cause, CanaryRefused):
                raise cause from None
            if _denied(cause) and cause is not None:
                raise CanaryRefused(self.topic, self._doing, cause) from None
            raise

    def _refuse(self, operation: str, error: BaseException) -> None:
        """Kafka refused the producer or the consumer for want of an ACL: said once, and the
        start no longer waited for (`start`, the caller's warm wait)."""
        if self.refused is None:
            self.refused = CanaryRefused(self.topic, operation, error)
            # Before the roll's first action the roll stops with it; later, said once here.
            logger.log(logging.WARNING if self.warm.is_set() else logging.DEBUG, "%s", self.refused)
        self._consumer_ready.set()
        self.warm.set()

    # ---- the clients ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the consumer, then, once it reads, the producer (blocking, up to the delivery
        timeout for the consumer: a consumer that cannot read yet is said, not fatal)."""
        self._threads = [
            threading.Thread(target=self._consume, name="canary-consumer", daemon=True),
            threading.Thread(target=self._produce, name="canary-producer", daemon=True),
        ]
        self._threads[0].start()
        if not self._consumer_ready.wait(self.delivery_timeout):
            logger.warning(
                "canary %s: the consumer cannot read yet: %s", self.topic, self.last_error
            )
        if self.refused is not None:  # READ: the roll stops before its first action
            return
        self.started_at = self.clock()
        self._threads[1].start()

    def stop(self, *, wait: bool = True) -> None:
        """Stop sending, wait for the answers still due (the delivery timeout bounds it), then
        stop reading; without `wait`, only tell the threads to stop (an interrupted roll)."""
        self._stop.set()
        for thread in self._threads if wait else ():
            thread.join(self.delivery_timeout + 10)

    @property
    def last_ack(self) -> float | None:
        return self.sends.last_ack

    def samples(self) -> tuple[list[CanarySample], list[CanaryArrival], list[float]]:
        """Every answered send, every arrival (in order), and when each unanswered send was
        sent."""
        return self.sends.snapshot()

    def _error(self, error: BaseException) -> None:
        self.last_error = f"{type(error).__name__}: {error}"[:300]

    def _client_settings(self) -> dict[str, Any]:
        settings = dict(self.admin.settings)
        settings.pop("bootstrap_timeout_ms", None)  # an admin client's own
        settings["request_timeout_ms"] = min(
            int(settings.get("request_timeout_ms", REQUEST_TIMEOUT_MS)), REQUEST_TIMEOUT_MS
        )
        return settings

    def _producer(self) -> Any | None:
        from kafka import KafkaProducer

        timeout_ms = int(self.delivery_timeout * 1000)
        try:
            return KafkaProducer(
                bootstrap_servers=self.admin.bootstrap.split(","),
                client_id="rollguard-canary",
                acks="all",
                enable_idempotence=True,
                linger_ms=0,
                delivery_timeout_ms=timeout_ms,
                max_block_ms=timeout_ms,
                **self._client_settings(),
            )
        except Exception as error:  # the library's boundary: a canary that cannot produce
            self._error(error)
            return None

    def _produce(self) -> None:
        """One send every `every` seconds, from one producer at a time. A producer that leaves
        a send unanswered for `OVERDUE` delivery timeouts has broken its own bound (kafka-
        python 3.0.12's idempotent producer, once a batch it had sent expires, resets its
        producer id yet never asks for another: it sends nothing again, for good, as after a
        leader frozen or a quota's throttle): its unanswered sends count as failed, it is
        closed and another made (`renewals`)."""
        producer = self._producer()
        if producer is None:
            logger.warning("canary %s: no producer: %s", self.topic, self.last_error)
            return
        number = 0
        partitions: list[int] = []
        try:
            while not self._stop.is_set():
                if self.sends.overdue(OVERDUE * self.delivery_timeout):
                    producer, partitions = self._renew(producer), []
                    if producer is None:  # stopped while no producer could be made
                        return
                if not partitions:
                    with contextlib.suppress(Exception):
                        partitions = sorted(producer.partitions_for(self.topic) or ())
                        self.sends.partitions = len(partitions)
                self._send(
                    producer, number, partitions[number % len(partitions)] if partitions else None
                )
                number += 1
                self._stop.wait(self.every)
            with contextlib.suppress(Exception):  # what is left unanswered is failed by then
                producer.flush(self.delivery_timeout + 1)
        finally:
            if producer is not None:
                _close(producer, 1)

    def _renew(self, producer: Any) -> Any | None:
        given_up = self.sends.abandon()
        _close(producer, 0)
        self.renewals += 1
        logger.warning(
            "canary %s: %d sends unanswered for more than %gs: its producer replaced",
            self.topic,
            given_up,
            OVERDUE * self.delivery_timeout,
        )
        while not self._stop.is_set():
            fresh = self._producer()
            if fresh is not None:
                return fresh
            self._stop.wait(self.delivery_timeout)
        return None

    def _send(self, producer: Any, number: int, partition: int | None) -> None:
        self.sends.sent(number, partition)

        def failed(error: BaseException) -> None:
            self._error(error)
            if _denied(error):
                from kafka.errors import ClusterAuthorizationFailedError

                cluster = isinstance(error, ClusterAuthorizationFailedError)
                self._refuse("IDEMPOTENT_WRITE" if cluster else "WRITE", error)
            self.sends.failed(number)

        try:
            future = producer.send(
                self.topic,
                value=b"rollguard canary %d" % number,
                partition=partition,
                timestamp_ms=int(self._wall() * 1000),
            )
        except Exception as error:  # no metadata within max_block_ms, or a closed producer
            failed(error)
        else:
            future.add_callback(lambda _: self.sends.acknowledged(number))
            future.add_errback(failed)

    def _consume(self) -> None:
        """Read every partition from where it ended at the start; a consumer that raises out of
        poll() is replaced and goes on from where the last one was."""
        from kafka import KafkaConsumer

        positions: dict[Any, int] = {}
        while not self._stop.is_set():
            consumer = None
            try:
                consumer = KafkaConsumer(
                    bootstrap_servers=self.admin.bootstrap.split(","),
                    client_id="rollguard-canary",
                    group_id=None,
                    enable_auto_commit=False,
                    **self._client_settings(),
                )
                if not self._assign(consumer, positions):
                    self.last_error = f"no partitions of {self.topic} in the metadata yet"
                    self._stop.wait(1)
                    continue
                self._consumer_ready.set()
                while not self._stop.is_set():
                    self._read(consumer.poll(timeout_ms=200), positions)
            except Exception as error:  # the library's boundary: try again in a second
                self._error(error)
                if _denied(error):
                    self._refuse("READ", error)
                self._stop.wait(1)
            finally:
                if consumer is not None:
                    with contextlib.suppress(Exception):
                        consumer.close()

    def _assign(self, consumer: Any, positions: dict[Any, int]) -> bool:
        """Every partition assigned, each from where the last consumer was, else from its end;
        False while the topic has none in the consumer's metadata."""
        from kafka import TopicPartition

        parts = consumer.partitions_for_topic(self.topic) or set()
        if not parts:
            return False
        assigned = [TopicPartition(self.topic, p) for p in sorted(parts)]
        consumer.assign(assigned)
        for tp in assigned:
            if tp in positions:
                consumer.seek(tp, positions[tp])
            else:
                consumer.seek_to_end(tp)
                positions[tp] = consumer.position(tp)
        return True

    def _read(self, batches: Mapping[Any, Sequence[Any]], positions: dict[Any, int]) -> None:
        now, wall = self.clock(), self._wall()
        arrived = []
        for tp, records in batches.items():
            for record in records:
                positions[tp] = record.offset + 1
                if (record.value or b"").startswith(b"rollguard canary "):
                    late = max(0.0, wall - record.timestamp / 1000)
                    arrived.append(CanaryArrival(now, late, tp.partition))
        if arrived:
            self.sends.arrived(arrived)
