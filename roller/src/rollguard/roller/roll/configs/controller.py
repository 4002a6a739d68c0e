"""A controller-only node's own configuration, asked of the controller itself on its listener
(`roll` and `plan` with a desired file for it).

Kafka's controllers serve DescribeConfigs and IncrementalAlterConfigs for their own BROKER
resource on the controller listener (KIP-919; `kafka-configs --bootstrap-controller`), but no
Metadata, which kafka-python's clients bootstrap with ("no metadata support"). So this speaks to
one controller directly: one blocking connection, kafka-python's own protocol classes to encode
and decode (ApiVersions to choose each request's version, its SASL mechanisms when the listener
asks for SASL), and kafka-python's own request builders and answer readers for the configs, so
that a controller's answer reads exactly as a broker's does (`configs.kafka`).

- **Where**: the controller listener of the node's desired file: the first name of
  `controller.listener.names`, its address in `listeners` (a wildcard or empty host: the host of
  the node's agent), its security protocol in `listener.security.protocol.map` (PLAINTEXT when
  the map does not name it, as Kafka does for a listener named after a protocol). Credentials
  are the roller's own (`--kafka-properties`: TLS files, SASL user).
- **Live or restart**: a controller has no cluster-wide default of its own to set: every key is
  validated at its own resource only (validate_only), and Kafka's answer says whether it takes
  it live.

Every failure is an `AdminApiError` naming the controller and the call; values sent (a
sensitive one too) go to the controller only.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rollguard.roller.kafka_admin import AdminApiError
from rollguard.roller.roll.configs.kafka import (
    DEFAULT_RESOURCE,
    ConfigsAsync,
    incremental_request,
    own_keys,
    refusal,
)
from rollguard.shared.converters import HostPort
from rollguard.shared.javaprops import Property

TIMEOUT = 10.0  # seconds for each connection and answer
NOT_CONTROLLER = 41  # Kafka's error code: asked of a controller that is not the active one
ATTEMPTS = 3
WILDCARDS = ("", "0.0.0.0", "::", "[::]")  # noqa: S104 (read, never bound to)
ASKED_AT_ITS_OWN = "a controller, asked at its own resource"


def controller_listener(
    properties: Sequence[Property], agent_host: str | None
) -> tuple[HostPort, str] | str:
    """The controller listener's address and security protocol from a node's desired file, or
    why it cannot be told."""
    values = {p.key: p.value for p in properties}
    names = [n.strip() for n in values.get("controller.listener.names", "").split(",") if n.strip()]
    if not names:
        return "its desired file has no controller.listener.names"
    name = names[0]
    for listener in values.get("listeners", "").split(","):
        label, sep, address = listener.strip().partition("://")
        if not sep or label.strip().upper() != name.upper():
            continue
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            return f"listener {name} in its desired file has no port: {listener.strip()!r}"
        if host in WILDCARDS:
            if agent_host is None:
                return f"listener {name} listens on every address, and the node has no agent host"
            host = agent_host
        protocols = dict(
            pair.split(":", 1)
            for pair in values.get("listener.security.protocol.map", "").split(",")
            if ":" in pair
        )
        protocol = protocols.get(name, name if name in PROTOCOLS else "PLAINTEXT")
        return HostPort(host.strip("[]"), int(port)), protocol.strip().upper()
    return f"its desired file's listeners have no {name} listener"


PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ControllerConnection:
    """One blocking connection to a controller's listener: `call(request)` -> its response."""

    def __init__(
        self, address: HostPort, protocol: str, settings: Mapping[str, Any], timeout: float
    ) -> None:
        from kafka.protocol.parser import KafkaProtocol

        self.address, self.protocol, self.settings, self.timeout = (
            address,
            protocol,
            settings,
            timeout,
        )
        self._parser = KafkaProtocol(client_id="rollguard")
        self._socket = self._open()
        self._versions: Any = None
        try:
            self._versions = self._api_versions()
            if protocol.startswith("SASL_"):
                self._authenticate()
        except BaseException:
            self.close()
            raise

    def _open(self) -> socket.socket:
        raw = socket.create_connection((self.address.host, self.address.port), self.timeout)
        raw.settimeout(self.timeout)
        if not self.protocol.endswith("SSL"):
            return raw
        context = ssl.create_default_context(cafile=self.settings.get("ssl_cafile"))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.settings.get("ssl_certfile"):
            context.load_cert_chain(
                self.settings["ssl_certfile"],
                self.settings.get("ssl_keyfile"),
                self.settings.get("ssl_password"),
            )
        context.check_hostname = bool(self.settings.get("ssl_check_hostname", True))
        return context.wrap_socket(raw, server_hostname=self.address.host)

    def call(self, request: Any) -> Any:
        """Send `request` (its version the highest both sides speak, within its own bounds)
        and wait for its answer."""
        if request.API_VERSION is None and self._versions is not None:
            request.API_VERSION = self._versions.api_version(request)
        self._parser.send_request(request)
        self._socket.sendall(self._parser.send_bytes())
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            data = self._socket.recv(65536)
            if not data:
                raise ConnectionError("the controller closed the connection")
            for _, response in self._parser.receive_bytes(data):
                return response
        raise TimeoutError(f"no answer within {self.timeout:.0f} s")

    def _api_versions(self) -> Any:
        from kafka.protocol.broker_version_data import BrokerVersionData
        from kafka.protocol.metadata import ApiVersionsRequest

        request = ApiVersionsRequest(
            version=0, client_software_name="rollguard", client_software_version="1"
        )
        response = self.call(request)
        if response.error_code != 0:
            raise ConnectionError(f"ApiVersions answered error code {response.error_code}")
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        return BrokerVersionData(api_versions=versions)

    def _authenticate(self) -> None:
        from kafka.net.sasl import get_sasl_mechanism
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

        name = self.settings.get("sasl_mechanism") or "PLAIN"
        answer = self.call(SaslHandshakeRequest(mechanism=name, max_version=1))
        if answer.error_code != 0 or name not in answer.mechanisms:
            raise ConnectionError(
                f"the controller listener does not take SASL {name} (it takes "
                f"{', '.join(answer.mechanisms) or 'none'})"
            )
        mechanism = get_sasl_mechanism(name)(host=self.address.host, **self.settings)
        while not mechanism.is_done():
            reply = self.call(SaslAuthenticateRequest(mechanism.auth_bytes()))
            if reply.error_code != 0:
                raise ConnectionError(f"SASL {name} refused: {reply.error_message}")
            mechanism.receive(reply.auth_bytes)
        if not mechanism.is_authenticated():
            raise ConnectionError(f"SASL {name} did not authenticate")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.close()


class ControllerConfigs(ConfigsAsync):
    """A controller-only node's configuration, read and changed on its own listener, with the
    interface of `configs.kafka.KafkaConfigs` (one reader per controller)."""

    def __init__(
        self,
        address: HostPort,
        protocol: str,
        settings: Mapping[str, Any],
        *,
        timeout: float = TIMEOUT,
    ) -> None:
        self.address, self.protocol, self.settings = address, protocol, dict(settings)
        self.timeout = timeout

    @contextlib.contextmanager
    def _connection(
        self, what: str, address: HostPort | None = None
    ) -> Iterator[ControllerConnection]:
        address = address or self.address
        where = f"the controller listener {address} ({self.protocol})"
        try:
            connection = ControllerConnection(address, self.protocol, self.settings, self.timeout)
        except (OSError, ValueError) as exc:
            raise AdminApiError(f"{what} at {where}: {exc}") from exc
        try:
            yield connection
        except AdminApiError:
            raise
        except Exception as exc:  # the library's boundary, and the socket's
            raise AdminApiError(f"{what} at {where}: {exc}") from exc
        finally:
            connection.close()

    def describe_raw(self, node: int) -> dict[str, dict[str, Any]]:
        """Blocking: the controller's every key, as `KafkaConfigs.describe_raw` returns a
        broker's."""
        from kafka.admin import ConfigResource, ConfigResourceType
        from kafka.admin._configs import ConfigAdminMixin

        resource = ConfigResource(ConfigResourceType.BROKER, str(node))
        request = ConfigAdminMixin._describe_configs_request([resource], include_synonyms=True)
        with self._connection(f"DescribeConfigs of controller {node}") as connection:
            response = connection.call(request)
            for result in response.results:
                if result.error_code != 0:
                    raise AdminApiError(
                        f"DescribeConfigs of controller {node}: "
                        f"{result.error_message or f'error code {result.error_code}'}"
                    )
            answer = ConfigAdminMixin._describe_configs_process_responses([response], "all")
        return own_keys(answer, str(node))

    def alter_raw(
        self, node: int | None, configs: Mapping[str, str | None], *, validate_only: bool
    ) -> str | None:
        """Blocking: IncrementalAlterConfigs of `configs` at the controller's own resource, sent
        to the active controller (only it changes the metadata; another answers NOT_CONTROLLER);
        None done (or valid), else Kafka's refusal."""
        if node is None:  # never asked: a controller's keys are its own
            return ASKED_AT_ITS_OWN
        request = incremental_request(str(node), configs, validate_only=validate_only)
        what = "IncrementalAlterConfigs" + (" (validate only)" if validate_only else "")
        what += f" at controller {node}"
        for _ in range(ATTEMPTS):  # leadership may move between the two calls: asked again
            with self._connection(what) as connection:
                active = self._active(connection)
                if active is None or active == self.address:
                    response = connection.call(request)
                else:
                    with self._connection(what, active) as leader:
                        response = leader.call(request)
            if all(r.error_code != NOT_CONTROLLER for r in response.responses):
                break
        return refusal(response)

    def _active(self, connection: ControllerConnection) -> HostPort | None:
        """The active controller's address on this listener, as the controllers say it
        (DescribeCluster of the controllers, KIP-919); None when not told."""
        from kafka.protocol.admin import DescribeClusterRequest

        answer = connection.call(
            DescribeClusterRequest(
                include_cluster_authorized_operations=False, endpoint_type=2, min_version=1
            )
        )
        if answer.error_code != 0:
            return None
        for found in answer.brokers:
            if found.broker_id == answer.controller_id:
                return HostPort(found.host, found.port)
        return None

    def _live_answers(
        self, node: int, changes: Mapping[str, str | None]
    ) -> dict[str, tuple[str | None, str | None]]:
        return {
            key: (ASKED_AT_ITS_OWN, self.alter_raw(node, {key: value}, validate_only=True))
            for key, value in changes.items()
        }

    def close(self) -> None:
        pass  # a connection per call


__all__ = ["DEFAULT_RESOURCE", "ControllerConfigs", "controller_listener"]
