"""Prometheus metrics of the agent, rendered at scrape time from the sampler's latest outcome.

Gauges about the broker are computed when Prometheus asks, so sampling does no metrics work;
counters are incremented by the sampler's listener, once per round. The connection gauges are
read from the ports' limiters at scrape time too; refused handshakes, dropped connections and
failed timeline writes are counted where they happen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rollguard.agent.connections import Port, Stage
from rollguard.agent.readings import FailureReason
from rollguard.agent.sampler import Sample, Sampler, Unavailable
from rollguard.agent.tls_gate import REASONS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# `_created` series double every counter and tell operators nothing here.
disable_created_metrics()  # type: ignore[no-untyped-call]


class AgentMetrics(Collector):
    def __init__(self, sampler: Sampler, clock: Callable[[], float]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._sampler = sampler
        self._clock = clock
        self.samples = Counter(
            "rollguard_agent_samples",
            "JMX rounds that gave a usable sample",
            registry=self.registry,
        )
        self.errors = Counter(
            "rollguard_agent_sampler_errors",
            "JMX rounds that gave no usable sample, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.tls_reloads = Counter(
            "rollguard_agent_tls_reloads",
            "Reloads of changed TLS files, by result",
            ["result"],
            registry=self.registry,
        )
        self.tls_handshake_failures = Counter(
            "rollguard_tls_handshake_failures",
            "TLS handshakes the API port refused or that did not finish, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.connections_dropped = Counter(
            "rollguard_agent_connections_dropped",
            "Connections the agent ended or refused to bound its resources, by port and reason",
            ["port", "reason"],
            registry=self.registry,
        )
        self.timeline_write_errors = Counter(
            "rollguard_timeline_write_errors",
            "Timeline records that could not be written (a full or failing disk)",
            registry=self.registry,
        )
        for reason in FailureReason:
            if reason not in (FailureReason.NO_SAMPLE_YET, FailureReason.STALE_SAMPLE):
                self.errors.labels(reason=reason.value)
        for result in ("ok", "error"):
            self.tls_reloads.labels(result=result)
        for tls_reason in REASONS:
            self.tls_handshake_failures.labels(reason=tls_reason)
        self._ports: Sequence[Port] = ()
        self.registry.register(self)
        sampler.subscribe(self._count)

    def watch_ports(self, ports: Sequence[Port]) -> None:
        """Report the open connections of these ports, by stage, and count their drops."""
        self._ports = ports
        for port in ports:
            for reason in ("evicted", "refused", "header-timeout", "header-too-large"):
                self.connections_dropped.labels(port=port.name, reason=reason)

    def _count(self, previous: Sample | Unavailable, latest: Sample | Unavailable) -> None:
        if isinstance(latest, Sample):
            self.samples.inc()
        else:
            self.errors.labels(reason=latest.reason.value).inc()

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        yield from self._operations()
        if self._ports:
            connections = GaugeMetricFamily(
                "rollguard_agent_connections",
                "Open connections, by port and stage (handshake, unproven, proven)",
                labels=["port", "stage"],
            )
            for port in self._ports:
                for stage in Stage:
                    connections.add_metric(
                        [port.name, stage.name.lower()], port.limiter.count(stage)
                    )
            yield connections
        latest = self._sampler.latest
        current = self._sampler.current()
        ready = isinstance(current, Sample) and current.report.broker_state.is_ready
        yield _gauge(
            "rollguard_agent_ready",
            "1 when the broker is ready (3 <= state != 127)",
            1 if ready else 0,
        )
        yield _gauge(
            "rollguard_agent_sample_up",
            "1 when a usable sample is served (see sampler_errors_total for why not)",
            1 if isinstance(current, Sample) else 0,
        )
        if self._sampler.last_duration is not None:
            yield _gauge(
                "rollguard_agent_sample_duration_seconds",
                "Wall time of the latest JMX round",
                self._sampler.last_duration,
            )
        if isinstance(latest, Sample):
            report = latest.report
            yield _gauge(
                "rollguard_agent_sample_age_seconds",
                "Age of the latest usable sample",
                self._clock() - latest.taken_at,
            )
            yield _gauge(
                "rollguard_agent_broker_state",
                "Kafka BrokerState of the latest usable sample",
                int(report.broker_state),
            )
            if report.recovery is not None:
                yield _gauge(
                    "rollguard_agent_remaining_logs_to_recover",
                    "Logs left to recover, summed over all log dirs",
                    report.recovery.remaining_logs,
                )
                yield _gauge(
                    "rollguard_agent_remaining_segments_to_recover",
                    "Segments left to recover, summed over all log dirs and threads",
                    report.recovery.remaining_segments,
                )

    def _operations(self) -> Iterator[Metric]:
        """The retry counters of the shared policy (the reference's retry, failure and success
        totals), by operation."""
        families = {
            "retries": CounterMetricFamily(
                "rollguard_operation_retries", "Retries, by operation", labels=["operation"]
            ),
            "failures": CounterMetricFamily(
                "rollguard_operation_failures",
                "Operations that failed after all retries or with an error not worth retrying",
                labels=["operation"],
            ),
            "successes": CounterMetricFamily(
                "rollguard_operation_successes",
                "Operations that succeeded, by operation",
                labels=["operation"],
            ),
        }
        for operation, counts in self._sampler.stats.snapshot().items():
            for field, family in families.items():
                family.add_metric([operation], getattr(counts, field))
        yield from families.values()

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
