"""A broker's configuration as Kafka reports it, and whether Kafka takes a change of it live
(the Admin API through kafka-python; the comparison itself is `roll.configs.diff`, pure).

- `running(broker)`: DescribeConfigs on the BROKER resource `broker`, every key, with synonyms:
  kafka-python's dict for that resource, key -> {value, read_only, config_source, is_sensitive,
  synonyms, config_type, documentation}. A broker resource is answered by that broker only.
- `live_answers(broker, changes)`: for each key, IncrementalAlterConfigs with validate_only,
  first at the cluster-default BROKER resource "" (accepted: a cluster-wide key), then, if
  refused there, at `broker`'s own resource (accepted: a per-broker key such as `listeners`,
  which Kafka refuses as a default with "Cannot update these configs at default cluster level,
  broker id must be specified"). Nothing is changed: validate_only. One key a request, since
  Kafka answers a resource as a whole.
- `alter(broker, configs)`: IncrementalAlterConfigs at `broker` (None: the cluster default),
  not validate_only: a roll's live step. Kafka writes it to the metadata log; each broker takes
  it when it replays the record, so a read-back polls.

kafka-python's `alter_configs` refuses a BROKER resource whose name is not a broker id, so the
default resource's request is built with its own request builder and sent through its
connection manager (kafka-python 3.0.12). Values sent for validation (a sensitive one too) go to
Kafka only: never logged, never in a message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from rollguard.roller.kafka_admin import KafkaObserver

__all__ = ["ConfigsAsync", "KafkaConfigs", "incremental_request", "own_keys", "refusal"]

DEFAULT_RESOURCE = ""  # the BROKER resource of the cluster-wide default


def incremental_request(
    name: str, configs: Mapping[str, str | None], *, validate_only: bool
) -> Any:
    """kafka-python's IncrementalAlterConfigs request of `configs` (key -> value; None: delete)
    at the BROKER resource `name` (its own builder: see the module)."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
    from kafka.admin._configs import ConfigAdminMixin

    ops = {
        key: (AlterConfigOp.SET if value is not None else AlterConfigOp.DELETE, value)
        for key, value in configs.items()
    }
    resource = ConfigResource(ConfigResourceType.BROKER, name, configs=ops)
    return ConfigAdminMixin._alter_configs_request(
        [resource], validate_only=validate_only, incremental=True
    )


def refusal(response: Any) -> str | None:
    """The first refusal in an IncrementalAlterConfigs answer, None when it took everything."""
    for result in response.responses:
        if result.error_code != 0:
            return str(result.error_message or f"error code {result.error_code}")
    return None


def own_keys(answer: Mapping[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """The BROKER resource `name`'s keys in kafka-python's DescribeConfigs answer."""
    found = answer.get("broker", {}).get(name)
    if not isinstance(found, dict):
        return {}
    return {str(key): dict(entry) for key, entry in found.items()}


class ConfigsAsync:
    """The awaitable side of a configuration reader, over its blocking calls (`describe_raw`,
    `_live_answers`, `alter_raw`), each in a worker thread."""

    def describe_raw(self, broker: int) -> dict[str, dict[str, Any]]:
        raise NotImplementedError

    def _live_answers(
        self, broker: int, changes: Mapping[str, str | None]
    ) -> dict[str, tuple[str | None, str | None]]:
        raise NotImplementedError

    def alter_raw(
        self, broker: int | None, configs: Mapping[str, str | None], *, validate_only: bool
    ) -> str | None:
        raise NotImplementedError

    async def running(self, broker: int) -> dict[str, dict[str, Any]]:
        """`broker`'s configuration (DescribeConfigs, every key, with synonyms); AdminApiError."""
        return await asyncio.to_thread(self.describe_raw, broker)

    async def live_answers(
        self, broker: int, changes: Mapping[str, str | None]
    ) -> dict[str, tuple[str | None, str | None]]:
        """key -> (Kafka's refusal at the cluster default, at `broker`; None: accepted; the
        second is asked only when the first refused); AdminApiError."""
        return await asyncio.to_thread(self._live_answers, broker, dict(changes))

    async def alter(self, broker: int | None, configs: Mapping[str, str | None]) -> str | None:
        """Apply `configs` live at `broker` (None: the cluster default): None done, else
        Kafka's refusal; AdminApiError when Kafka cannot be asked."""
        return await asyncio.to_thread(self.alter_raw, broker, dict(configs), validate_only=False)


class KafkaConfigs(ConfigsAsync):
    """Reads brokers' configurations through a `KafkaObserver`'s client (its `_library`: one
    client, kafka-python's errors become `AdminApiError` naming the call)."""

    def __init__(self, kafka: KafkaObserver) -> None:
        self.kafka = kafka

    def describe_raw(self, broker: int) -> dict[str, dict[str, Any]]:
        """Blocking: `broker`'s every key, as kafka-python returns them (see the module)."""
        from kafka.admin import ConfigResource, ConfigResourceType

        resource = ConfigResource(ConfigResourceType.BROKER, str(broker))
        with self.kafka._library(f"DescribeConfigs of broker {broker}") as admin:
            answer = admin.describe_configs(
                config_resources=[resource], include_synonyms=True, config_filter="all"
            )
        return own_keys(answer, str(broker))

    def validate_raw(self, broker: int | None, key: str, value: str | None) -> str | None:
        """Blocking: whether Kafka would take `key` set to `value` (None: deleted) live at
        `broker`'s resource (None: the cluster default); None yes, else Kafka's refusal."""
        return self.alter_raw(broker, {key: value}, validate_only=True)

    def alter_raw(
        self, broker: int | None, configs: Mapping[str, str | None], *, validate_only: bool
    ) -> str | None:
        """Blocking: IncrementalAlterConfigs of `configs` (key -> value; None: delete) at
        `broker`'s resource (None: the cluster default); None: done (or, `validate_only`,
        valid), else Kafka's refusal. The values never leave this call but to Kafka."""
        name = DEFAULT_RESOURCE if broker is None else str(broker)
        request = incremental_request(name, configs, validate_only=validate_only)
        where = "the cluster default" if broker is None else f"broker {broker}"
        what = "IncrementalAlterConfigs" + (" (validate only)" if validate_only else "")
        with self.kafka._library(f"{what} at {where}") as admin:

            async def send() -> Any:
                # A broker's resource must go to that broker; the default to any.
                return await admin._manager.send(request, node_id=broker)

            response = admin._manager.run(send)
        return refusal(response)

    def _live_answers(
        self, broker: int, changes: Mapping[str, str | None]
    ) -> dict[str, tuple[str | None, str | None]]:
        answers = {}
        for key, value in changes.items():
            at_default = self.validate_raw(None, key, value)
            at_broker = None if at_default is None else self.validate_raw(broker, key, value)
            answers[key] = at_default, at_broker
        return answers

    def close(self) -> None:
        self.kafka.close()
