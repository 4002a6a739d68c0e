"""The one ConfigMap store: named text values (keys) of one ConfigMap, read and written through
the Kubernetes API.

Three things keep state in ConfigMaps: the roll journal (`rollguard-roll-<id>`, key
`journal.json`), the auto-restart counts (key `auto-restart.json`) and connector offsets (one key
per connector). All go through `ConfigMapStore`: a write replaces the ConfigMap with its
`resourceVersion`, so a concurrent writer makes it fail instead of being overwritten (no lost
update); it keeps the ConfigMap's other keys, and creates the ConfigMap (with rollguard's
`managed-by` label) when it does not exist. The client is lightkube's synchronous `Client`: a
ConfigMap is read or written a few times per command, never on a hot path, so lightkube is
imported when one is (every other command starts without it).
"""

from __future__ import annotations

from typing import Any

from rollguard.shared.errors import ConfigError

MANAGED_BY = {"app.kubernetes.io/managed-by": "rollguard"}


class MissingKey(ConfigError):
    """The folder, file, ConfigMap or key to read does not exist."""


class ConfigMapStore:
    """The keys of ConfigMap `namespace/name`. API failures are `KubernetesError`s naming the
    call; a missing ConfigMap or key is `MissingKey`."""

    def __init__(self, client: Any, namespace: str, name: str) -> None:
        self.client = client  # a synchronous lightkube Client
        self.namespace = namespace
        self.name = name
        self.where = f"ConfigMap {namespace}/{name}"

    def _get(self) -> Any | None:
        from lightkube import ApiError
        from lightkube.resources.core_v1 import ConfigMap

        from rollguard.roller.kubernetes import API_ERRORS, api_error

        try:
            return self.client.get(ConfigMap, self.name, namespace=self.namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise api_error(f"get configmap {self.name}", exc) from exc
        except API_ERRORS as exc:
            raise api_error(f"get configmap {self.name}", exc) from exc

    def read(self, key: str) -> str:
        cm = self._get()
        if cm is None:
            raise MissingKey(f"{self.where} does not exist")
        data = cm.data or {}
        if key not in data:
            keys = ", ".join(sorted(data)) or "none"
            raise MissingKey(f"{self.where} has no key {key} (its keys: {keys})")
        return str(data[key])

    def write(self, key: str, text: str) -> str:
        """Set `key` (creating the ConfigMap if needed); returns where it went, for messages."""
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import ConfigMap

        from rollguard.roller.kubernetes import API_ERRORS, api_error

        try:
            cm = self._get()
            if cm is None:
                meta = ObjectMeta(name=self.name, namespace=self.namespace, labels=MANAGED_BY)
                self.client.create(ConfigMap(metadata=meta, data={key: text}))
            else:
                cm.data = {**(cm.data or {}), key: text}
                self.client.replace(cm)  # with its resourceVersion: no lost update
        except API_ERRORS as exc:
            raise api_error(f"write configmap {self.name}", exc) from exc
        return f"{self.where} key {key}"
