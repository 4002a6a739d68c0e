"""Each pod's desired server.properties on Kubernetes: the file its ConfigMap holds, as the pod
will see it at its next start (`rollguard plan --compare-config`).

Which spec: a pod owned by a StatefulSet is made again from the StatefulSet's current template
when it restarts, so the template's volumes say which ConfigMap it will mount (a new ConfigMap
name, as kustomize's configMapGenerator makes, counts from the template, not the running pod);
any other pod (a StrimziPodSet's, a bare one) keeps its own spec.

Which volume: `--config-key` names the file. A bare name (`server.properties`) is a key of a
ConfigMap volume, or the file name an `items` entry gives it (`path`), in any volume mounted by a
container or an init container (an init container that copies the file and fills it in mounts
it too); a path (`/opt/kafka/config/server.properties`) is where a container sees it: a volume
mounted on its folder, or on the file itself with `subPath`. Volumes of `projected` ConfigMaps
count the same. Exactly one ConfigMap may hold it: none, or two (say which with the full path),
is a ConfigError, as is a ConfigMap that does not exist, a key that is not text, or a line Kafka
could not read, each naming the pod, the ConfigMap, the key and the line.

What a pod's start sets cannot be compared with the file (`unchecked`): a value holding a
placeholder (`${NAME}`, `$NAME`, `{{ name }}`: filled by a start script or envsubst; also a
Kafka config provider's `${provider:path:key}`, resolved by the broker at start), the keys given
with `--config-set-at-start`, and, in a ConfigMap that several pods mount (a shared one),
node.id and broker.id (one file cannot hold each pod's id: a start script sets it, from the
pod's ordinal say). They are listed as not compared, with their keys only.

A ConfigMap is read once however many pods mount it. Values are never logged or put in a
message: a configuration holds passwords.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lightkube.models.core_v1 import (
    ConfigMapProjection,
    ConfigMapVolumeSource,
    KeyToPath,
    PodSpec,
)
from lightkube.resources.apps_v1 import StatefulSet
from lightkube.resources.core_v1 import ConfigMap, Pod

from rollguard.roller.kubernetes import get_or_none
from rollguard.roller.model import Node
from rollguard.shared.errors import ConfigError
from rollguard.shared.javaprops import PropertiesError, Property, parse_properties

__all__ = [
    "CONFIG_KEY",
    "IDENTITY_KEYS",
    "PodConfig",
    "Source",
    "placeholder_keys",
    "read_pod_configs",
    "sources",
]

CONFIG_KEY = "server.properties"
# Keys a shared file cannot hold for each pod: set at its start.
IDENTITY_KEYS = frozenset({"node.id", "broker.id"})
PLACEHOLDER = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\{\{[^}]*\}\}")


@dataclass(frozen=True, slots=True)
class Source:
    """A ConfigMap volume of a pod spec that holds, or may hold, the file: `key` the
    ConfigMap's key, `mapped` True when an `items` entry names it (so it must be there), False
    for a volume that shows every key (the file is there if the ConfigMap has the key)."""

    volume: str
    configmap: str
    key: str
    mapped: bool
    optional: bool


@dataclass(frozen=True, slots=True)
class PodConfig:
    """A pod's desired configuration: the properties of `key` in ConfigMap `configmap`, and the
    keys its start sets (not compared). A controller-only pod's is empty: not read."""

    properties: tuple[Property, ...]
    unchecked: frozenset[str] = frozenset()
    configmap: str = ""
    key: str = ""


@dataclass(frozen=True, slots=True)
class _Volume:
    name: str
    configmap: str
    items: tuple[KeyToPath, ...] | None  # None: every key, as a file of its name
    optional: bool


def _volumes(spec: PodSpec) -> dict[str, list[_Volume]]:
    """The spec's ConfigMap volumes by volume name (a projected volume: one per source)."""
    found: dict[str, list[_Volume]] = {}
    for volume in spec.volumes or ():
        maps: list[ConfigMapVolumeSource | ConfigMapProjection] = []
        if volume.configMap is not None:
            maps.append(volume.configMap)
        if volume.projected is not None:
            maps += [s.configMap for s in volume.projected.sources or () if s.configMap]
        for cm in maps:
            if cm.name:
                items = tuple(cm.items) if cm.items else None
                found.setdefault(volume.name, []).append(
                    _Volume(volume.name, cm.name, items, bool(cm.optional))
                )
    return found


def _in_volume(volume: _Volume, path: str, *, by_key: bool) -> Source | None:
    """The source of the file at `path` inside `volume` (with `by_key`, also an item whose
    ConfigMap key is `path`)."""
    if volume.items is None:
        if "/" in path:  # a key is a file name, never a folder
            return None
        return Source(volume.name, volume.configmap, path, False, volume.optional)
    for item in volume.items:
        if item.path == path or (by_key and item.key == path):
            return Source(volume.name, volume.configmap, item.key, True, volume.optional)
    return None


def _by_name(volume: _Volume, name: str) -> Source | None:
    """An item whose file name, in a folder of the volume, is `name`."""
    for item in volume.items or ():
        if posixpath.basename(item.path) == name:
            return Source(volume.name, volume.configmap, item.key, True, volume.optional)
    return None


def sources(spec: PodSpec, file: str = CONFIG_KEY) -> list[Source]:
    """Where in `spec`'s mounted ConfigMap volumes the file `file` may come from (pure): a
    bare name as a key or an item's file name, a path as a container sees it."""
    volumes = _volumes(spec)
    containers = [*(spec.initContainers or ()), *(spec.containers or ())]
    mounts = [m for c in containers for m in c.volumeMounts or () if m.name in volumes]
    found: list[Source] = []
    if "/" not in file:
        for name in dict.fromkeys(m.name for m in mounts):
            for volume in volumes[name]:
                source = _in_volume(volume, file, by_key=True) or _by_name(volume, file)
                if source is not None:
                    found.append(source)
    else:
        wanted = posixpath.normpath(file)
        for mount in mounts:
            at = posixpath.normpath(mount.mountPath)
            if mount.subPath:
                inside = mount.subPath if at == wanted else None
            elif wanted.startswith(at.rstrip("/") + "/"):
                inside = wanted[len(at.rstrip("/")) + 1 :]
            else:
                inside = None
            if inside is not None:
                for volume in volumes[mount.name]:
                    if (source := _in_volume(volume, inside, by_key=False)) is not None:
                        found.append(source)
    return list(dict.fromkeys(found))


def placeholder_keys(properties: Iterable[Property]) -> set[str]:
    """The keys whose value holds a placeholder (pure; the values are never shown)."""
    return {p.key for p in properties if PLACEHOLDER.search(p.value)}


class _Reader:
    """Reads the pods, their StatefulSets and their ConfigMaps, each once."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._maps: dict[str, ConfigMap | None] = {}
        self._sets: dict[str, StatefulSet] = {}

    async def _get(self, kind: Any, name: str) -> Any:
        return await get_or_none(self.client, kind, name, self.namespace)

    async def spec(self, node: Node) -> tuple[PodSpec, str, bool]:
        """The spec the pod will start from, what it is (for messages), and whether it is a
        StatefulSet's template (every replica's)."""
        pod = await self._get(Pod, node.name)
        if pod is None or pod.spec is None:
            raise ConfigError(f"pod {node.name}: not found in namespace {self.namespace}")
        owners = (pod.metadata.ownerReferences or []) if pod.metadata else []
        owner = next((o.name for o in owners if o.kind == "StatefulSet"), None)
        if owner is None:
            return pod.spec, f"pod {node.name}", False
        if owner not in self._sets:
            found = await self._get(StatefulSet, owner)
            if found is None:
                raise ConfigError(f"pod {node.name}: its StatefulSet {owner} does not exist")
            self._sets[owner] = found
        template = self._sets[owner].spec.template if self._sets[owner].spec else None
        if template is None or template.spec is None:
            raise ConfigError(f"pod {node.name}: StatefulSet {owner} has no pod template")
        return template.spec, f"pod {node.name} (StatefulSet {owner}'s template)", True

    async def configmap(self, name: str) -> ConfigMap | None:
        if name not in self._maps:
            self._maps[name] = await self._get(ConfigMap, name)
        return self._maps[name]


def _text(found: ConfigMap, key: str, where: str) -> str | None:
    """The key's text (None: the ConfigMap has no such key); a binaryData key is decoded."""
    if found.data and key in found.data:
        return str(found.data[key])
    if found.binaryData and key in found.binaryData:
        try:
            return base64.b64decode(found.binaryData[key], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise ConfigError(f"{where}: binaryData that is not UTF-8 text") from None
    return None


async def _pod_config(reader: _Reader, node: Node, file: str) -> tuple[Source, str, bool]:
    """The pod's source of `file`, its text, and whether a StatefulSet's template names it."""
    spec, whose, template = await reader.spec(node)
    candidates = sources(spec, file)
    if not candidates:
        volumes = ", ".join(f"{v[0].name} ({v[0].configmap})" for v in _volumes(spec).values())
        raise ConfigError(
            f"{whose}: no ConfigMap volume it mounts holds {file} (its ConfigMap volumes: "
            f"{volumes or 'none'}); name the key or the file's path in the container with "
            "--config-key"
        )
    held: list[tuple[Source, str]] = []
    for source in candidates:
        where = f"{whose}: ConfigMap {source.configmap} key {source.key}"
        found = await reader.configmap(source.configmap)
        if found is None:
            if source.optional and not source.mapped:
                continue  # an optional ConfigMap that is not there shows no file
            raise ConfigError(
                f"{whose}: ConfigMap {source.configmap} (volume {source.volume}) does not "
                f"exist in namespace {reader.namespace}"
            )
        text = _text(found, source.key, where)
        if text is None:
            if source.mapped and not source.optional:
                raise ConfigError(f"{where}: no such key (volume {source.volume} maps it)")
            continue
        held.append((source, text))
    if not held:
        maps = ", ".join(dict.fromkeys(s.configmap for s in candidates))
        raise ConfigError(f"{whose}: no ConfigMap it mounts has {file} (ConfigMap {maps})")
    if len(held) > 1:
        said = ", ".join(f"ConfigMap {s.configmap} key {s.key}" for s, _ in held)
        raise ConfigError(
            f"{whose}: {file} is in {said}: name the file's path in the container with --config-key"
        )
    return (*held[0], template)


async def read_pod_configs(
    client: Any,
    namespace: str,
    nodes: Sequence[Node],
    *,
    file: str = CONFIG_KEY,
    set_at_start: Collection[str] = (),
) -> dict[str, PodConfig]:
    """Node name -> its pod's desired configuration (a controller-only node's is empty: it is
    not compared). `client`: a lightkube AsyncClient. ConfigError for what cannot be read."""
    reader = _Reader(client, namespace)
    read: dict[str, tuple[Source, list[Property], bool]] = {}
    found: dict[str, PodConfig] = {}
    for node in nodes:
        if not node.is_broker:
            found[node.name] = PodConfig(())
            continue
        source, text, template = await _pod_config(reader, node, file)
        try:
            properties = parse_properties(text)
        except PropertiesError as exc:
            raise ConfigError(
                f"pod {node.name}: ConfigMap {source.configmap} key {source.key}, line "
                f"{exc.line}: {exc.problem}"
            ) from None
        read[node.name] = source, properties, template
    mounted = Counter((s.configmap, s.key) for s, _, _ in read.values())
    for name, (source, properties, template) in read.items():
        # A StatefulSet's template is every replica's, whatever the selection holds.
        shared = template or mounted[source.configmap, source.key] > 1
        unchecked = placeholder_keys(properties) | set(set_at_start)
        if shared:
            unchecked |= IDENTITY_KEYS
        found[name] = PodConfig(
            tuple(properties), frozenset(unchecked), source.configmap, source.key
        )
    return found
