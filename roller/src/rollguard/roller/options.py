"""The options the roll and the collector share: how to reach agents, where the nodes are, the
output format; and what they build from them (the agent client, the platform).

Each is an `Options` dataclass (`rollguard.shared.settings`): a field is a flag `--name` and a
variable `ROLLGUARD_NAME`, with its default written once, here. A room's command composes them
by inheritance with its own.
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.roller.agent_client import AgentClient
from rollguard.roller.inventory import read_inventory
from rollguard.roller.model import DEFAULT_AGENT_URL
from rollguard.roller.platform import InventoryPlatform, Platform, load_inventory
from rollguard.shared.converters import choice, duration_between, servers
from rollguard.shared.errors import ConfigError
from rollguard.shared.logs import LOG_FORMATS
from rollguard.shared.retry import RetryStats
from rollguard.shared.retry_options import RetryOptions
from rollguard.shared.settings import Group, Options, option
from rollguard.shared.tls import client_context

ENV_PREFIX = "ROLLGUARD_"

# Sections of --help shared by the roller's commands.
CONNECTION = Group(
    "connection", "where the nodes are (an inventory, or pods on Kubernetes) and how to reach them"
)
OUTPUT = Group("output")

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class AgentOptions(RetryOptions):
    """The roller's client certificate for agents' mutual TLS, and its patience."""

    group = CONNECTION

    cert: Path = option(
        None, Path, "client certificate (PEM) presented to agents", "PATH", required=True
    )
    key: Path = option(None, Path, "its unencrypted PEM private key", "PATH", required=True)
    cacert: Path = option(
        None, Path, "CA bundle (PEM) that agents' certificates chain to", "PATH", required=True
    )
    timeout: float = option(
        "5s", duration_between("10ms", "1h"), "time for one request to an agent", "DURATION"
    )

    def agent_client(self, stats: RetryStats | None = None) -> AgentClient:
        tls = client_context(self.cacert, self.cert, self.key)
        return AgentClient(tls, self.retry_policy(), stats=stats, timeout=self.timeout)


@dataclass(frozen=True, kw_only=True)
class KafkaOptions(Options):
    """How to reach Kafka's Admin API."""

    group = CONNECTION

    bootstrap: str = option(
        None,
        servers,
        "Kafka bootstrap servers HOST:PORT[,...] for the Admin API",
        "SERVERS",
        required=True,
    )
    kafka_properties: Path | None = option(
        None, Path, "Kafka client properties file (TLS, SASL)", "FILE"
    )


@dataclass(frozen=True, kw_only=True)
class OutputOptions(Options):
    group = OUTPUT

    output: str = option(
        "text", choice("text", "json"), "text, or json (one object a line)", "FORMAT"
    )
    # Read by the entry point (`rollguard.roller.cli`), which configures logging before the
    # command runs; declared here so that every command has it, with its variable.
    log_format: str = option(
        "text",
        choice(*LOG_FORMATS),
        "log and progress lines on stderr: text (timestamped lines) or json (one object a line)",
        "FORMAT",
    )


@dataclass(frozen=True, kw_only=True)
class PlatformOptions(Options):
    """Where the nodes are: an inventory file, or broker pods on Kubernetes."""

    group = CONNECTION

    inventory: Path | None = option(None, Path, "YAML inventory of nodes (VMs, bare metal)", "FILE")
    namespace: str | None = option(None, str, "Kubernetes namespace of the broker pods", "NS")
    selector: str | None = option(None, str, "label selector of the broker pods", "SELECTOR")
    agent_url: str = option(DEFAULT_AGENT_URL, str, "agent URL template on Kubernetes", "TEMPLATE")
    service: str = option(
        "",
        str,
        "headless service of the broker pods, for {service} in --agent-url (default: each "
        "pod's spec.subdomain)",
        "NAME",
    )
    broker_role_label: str = option(
        "strimzi.io/broker-role", str, 'pod label that is "true" on brokers', "LABEL"
    )
    controller_role_label: str = option(
        "strimzi.io/controller-role", str, 'pod label that is "true" on KRaft controllers', "LABEL"
    )
    node_id_label: str | None = option(
        None, str, "pod label holding the node id (default: name suffix)", "LABEL"
    )

    def check(self) -> None:
        super().check()
        if (self.inventory is None) == (self.namespace is None):
            raise ConfigError("give either --inventory FILE or --namespace NS with --selector")
        if self.namespace is not None and not self.selector:
            raise ConfigError("--namespace needs --selector (e.g. strimzi.io/cluster=my-cluster)")

    def cluster_name(self) -> str:
        """The cluster's name in roll events, datasets, reports and expectations: the
        inventory's `cluster:`; when nothing names it, the inventory file's stem, or the
        selector's strimzi.io/cluster, or the namespace, and the guess is said (call once per
        command). Unchecked ("" when there is nothing to go by)."""
        name, guessed = self.cluster_naming()
        if guessed is not None:
            logger.warning("%s", guessed)
        return name

    def cluster_naming(self) -> tuple[str, str | None]:
        """The cluster's name, and how it was guessed when nothing names it (or None)."""
        if self.inventory is not None:
            named = read_inventory(self.inventory).cluster
            if named:
                return named, None
            name = self.inventory.stem.strip()
            return name, (
                f"the cluster is named {name!r} after the inventory file {self.inventory.name} "
                "(no `cluster:` in it): its events, dataset and expectations go by that name; "
                "name it with `cluster: NAME` in the inventory"
            )
        terms = dict(t.split("=", 1) for t in (self.selector or "").split(",") if "=" in t)
        name = terms.get("strimzi.io/cluster", "").strip()
        if name:
            return name, None  # Strimzi's own name for it
        name = (self.namespace or "").strip()
        return name, (
            f"the cluster is named {name!r} after --namespace (the selector has no "
            "strimzi.io/cluster): its events, dataset and expectations go by that name"
        )

    def platform(
        self,
        agents: AgentClient,
        stack: ExitStack,
        *,
        restart_timeout: float = 300.0,
        folder: Path | None = None,
        roll_id: str = "",
    ) -> tuple[Platform, Any]:
        """The platform of --inventory or --namespace/--selector, and on Kubernetes a
        synchronous client (for ConfigMaps), closed with `stack`; None for an inventory."""
        if self.inventory is not None:
            platform = InventoryPlatform(
                load_inventory(self.inventory),
                agents,
                restart_timeout=restart_timeout,
                folder=folder,
                roll_id=roll_id,
            )
            return platform, None
        assert self.namespace is not None and self.selector is not None  # check()
        from lightkube import AsyncClient, Client
        from lightkube.core.exceptions import ConfigError as KubeConfigError

        from rollguard.roller.kubernetes import (
            KubernetesPlatform,
            KubernetesSettings,
            prepare_decoders,
        )

        prepare_decoders()  # before the journal's thread and the event loop decode side by side
        try:
            client = AsyncClient(namespace=self.namespace)
            sync_client = Client(namespace=self.namespace)
        except KubeConfigError as exc:
            raise ConfigError(f"Kubernetes: {exc}") from None
        stack.callback(sync_client.close)
        settings = KubernetesSettings(
            self.namespace,
            self.selector,
            self.agent_url,
            self.service,
            self.node_id_label,
            self.broker_role_label,
            self.controller_role_label,
        )
        return KubernetesPlatform(client, settings), sync_client
