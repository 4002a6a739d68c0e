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

from typing import TYPE_CHECKING, Any

from rollguard.shared.errors import ConfigError

if TYPE_CHECKING:
    from rollguard.roller.kubernetes import AllowedCalls

MANAGED_BY = {"app.kubernetes.io/managed-by": "rollguard"}


class MissingKey(ConfigError):
    """The folder, file, ConfigMap or key to read does not exist."""


class ConfigMapStore:
    """The keys of ConfigMap `namespace/name`. API failures are `KubernetesUnavailable` or
    `KubernetesRefused`, naming the call; a missing ConfigMap or key is `MissingKey`."""

    def __init__(
        self, client: Any, namespace: str, name: str, allowed: AllowedCalls | None = None
    ) -> None:
        """`allowed`: a `kubernetes.AllowedCalls` shared by the stores of one command (a 403
        on a call it allowed before is an API server that has just started)."""
        self.client = client  # a synchronous lightkube Client
        self.namespace = namespace
        self.name = name
        self.where = f"ConfigMap {namespace}/{name}"
        self.allowed = allowed

    def _get(self) -> Any | None:
        from lightkube import ApiError
        from lightkube.resources.core_v1 import ConfigMap

        from rollguard.roller.kubernetes import API_ERRORS

        try:
            found = self.client.get(ConfigMap, self.name, namespace=self.namespace)
        except ApiError as exc:
            if exc.status.code == 404:
                self._allowed("get configmaps")
                return None
            raise self._error("get configmaps", f"get configmap {self.name}", exc) from exc
        except API_ERRORS as exc:
            raise self._error("get configmaps", f"get configmap {self.name}", exc) from exc
        self._allowed("get configmaps")
        return found

    def _allowed(self, kind: str) -> None:
        if self.allowed is not None:
            self.allowed.allowed(kind)

    def _error(self, kind: str, what: str, exc: Exception) -> Exception:
        from rollguard.roller.kubernetes import api_error

        if self.allowed is not None:
            return self.allowed.error(kind, what, exc)
        return api_error(what, exc)

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

        from rollguard.roller.kubernetes import API_ERRORS

        cm = self._get()
        kind = "create configmaps" if cm is None else "update configmaps"
        try:
            if cm is None:
                meta = ObjectMeta(name=self.name, namespace=self.namespace, labels=MANAGED_BY)
                self.client.create(ConfigMap(metadata=meta, data={key: text}))
            else:
                cm.data = {**(cm.data or {}), key: text}
                self.client.replace(cm)  # with its resourceVersion: no lost update
        except API_ERRORS as exc:
            raise self._error(kind, f"write configmap {self.name}", exc) from exc
        self._allowed(kind)
        return f"{self.where} key {key}"
