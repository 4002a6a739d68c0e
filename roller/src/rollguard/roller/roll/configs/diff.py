"""A node's configuration change, key by key: what it runs, what its file will say at its next
start, and how Kafka can take the difference (pure: no network, no Kafka library).

What a broker runs comes from Kafka itself (DescribeConfigs on its BROKER resource, with
synonyms; read by `rollguard.roller.roll.configs.kafka`): each key's value now and where it comes
from, in Kafka's order of precedence:

    DYNAMIC_BROKER_CONFIG          set live for this broker (kafka-configs --entity-name N)
    DYNAMIC_DEFAULT_BROKER_CONFIG  set live as the cluster-wide default (--entity-default)
    STATIC_BROKER_CONFIG           the broker's server.properties, as read at its start
    DEFAULT_CONFIG                 Kafka's built-in default

How a change can be made is the broker's own answer, never a table of ours: a `read_only` key
is read at start only (RESTART); any other is asked of Kafka's own validation (an
IncrementalAlterConfigs with validate_only): taken as the cluster default (LIVE_CLUSTER: a
cluster-wide key), taken for this broker only (LIVE_BROKER: a per-broker key such as
`listeners`), or refused live (RESTART, with Kafka's words). A key the broker does not list (a
listener-prefixed or plugin key, a misspelling) is classified RESTART: Kafka validates unknown
keys as custom ones and accepts them.

The trap: a dynamic value shadows the file's, across restarts. A key changed in server.properties
while a dynamic value of it (or of a synonym: `log.retention.ms` over `log.retention.hours`)
is set keeps the dynamic value after the restart, silently. Each such change names its shadow
(`ConfigChange.shadowed_by`).

Sensitive values (PASSWORD keys) are never returned by Kafka and never shown here: such a change
says whether it is certain (set where there was none, removed from the file) or not (both set:
`known` False, "may have changed").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rollguard.roller.roll.configs.values import (
    DERIVED,
    ConfigChange,
    DesiredValue,
    How,
    LiveAnswer,
    RunningConfig,
    Shadow,
    Source,
    same_value,
)

__all__ = ["changes", "to_validate"]


@dataclass(frozen=True, slots=True)
class _Difference:
    key: str
    running: RunningConfig | None
    to: str | None
    removed: bool
    shadow: Shadow | None
    known: bool


def _differences(
    desired: Mapping[str, DesiredValue], running: Mapping[str, RunningConfig]
) -> list[_Difference]:
    """Every key whose value in force would differ once the desired file is the node's: set in
    it, or dropped from it (a key the running file set), in key order."""
    keys = set(desired) | {k for k, r in running.items() if r.in_file}
    found = []
    for key in sorted(keys):
        wanted = desired.get(key)
        now = running.get(key)
        if now is None:  # the broker does not list it: nothing to compare with
            assert wanted is not None
            found.append(_Difference(key, None, wanted.value, False, None, False))
            continue
        if wanted is None and key in DERIVED and DERIVED[key] in desired:
            wanted = desired[DERIVED[key]]  # what Kafka will copy into it
        removed = wanted is None
        to = now.default if wanted is None else wanted.value
        shadow = _shadow(key, running)
        if now.sensitive:
            # No value to compare: set where there was none, or dropped, is certain.
            was_set = now.in_file or now.source is not Source.DEFAULT
            if removed or not was_set:
                found.append(_Difference(key, now, None, removed, shadow, True))
            else:
                found.append(_Difference(key, now, None, removed, shadow, False))
            continue
        in_force = shadow.value if shadow is not None else now.value
        if shadow is not None and same_value(to, shadow.value, now.type):
            continue  # the dynamic value is what the file asks: nothing changes
        if shadow is None and same_value(to, in_force, now.type):
            continue
        found.append(_Difference(key, now, to, removed, shadow, True))
    return found


def _shadow(key: str, running: Mapping[str, RunningConfig]) -> Shadow | None:
    """The dynamic value that outranks `key`'s file value: its own dynamic value, or one of a
    synonym of higher precedence (a key whose synonyms list `key` after a dynamic one)."""
    own = running[key]
    if own.source.dynamic:
        return Shadow(key, own.source, own.value)
    for other in running.values():
        names = [s.name for s in other.synonyms]
        if other.key == key or key not in names:
            continue
        ahead = other.synonyms[: names.index(key)]
        dynamic = next((s for s in ahead if s.source.dynamic), None)
        if dynamic is not None:
            return Shadow(dynamic.name, dynamic.source, dynamic.value)
    return None


def to_validate(
    desired: Mapping[str, DesiredValue], running: Mapping[str, RunningConfig]
) -> dict[str, str | None]:
    """The changes to put to Kafka's validation (validate_only), key -> the desired value (None:
    a delete, the key dropped from the file): every changing key the broker lists and does not
    call read-only. A sensitive one carries its desired value: it goes to Kafka only."""
    asked: dict[str, str | None] = {}
    for found in _differences(desired, running):
        if found.running is None or found.running.read_only:
            continue
        wanted = desired.get(found.key)
        asked[found.key] = wanted.value if wanted is not None else None
    return asked


def changes(
    desired: Mapping[str, DesiredValue],
    running: Mapping[str, RunningConfig],
    answers: Mapping[str, LiveAnswer] | None = None,
) -> list[ConfigChange]:
    """Each key of one node that the desired configuration changes, with how Kafka can take it
    (`answers`: its validation of each key of `to_validate`; a key it was not asked about is a
    RESTART) and the dynamic value that would shadow it."""
    answers = answers or {}
    result = []
    for found in _differences(desired, running):
        now = found.running
        if now is None:
            why = (
                "the broker does not list this key (a listener- or plugin-prefixed key, or a "
                "misspelling): only a restart reads it"
            )
            result.append(ConfigChange(found.key, None, None, How.RESTART, why, listed=False))
            continue
        how, why = _how(now, answers.get(found.key))
        if found.shadow is not None and found.shadow.key == found.key and how is not How.RESTART:
            why += f"; {found.shadow.text(now.sensitive)} is set over live, to the file's value"
        elif found.shadow is not None:
            why += (
                f"; but {found.shadow.text(now.sensitive)} outranks the file: after a restart "
                "it stays in force; change it or delete it live"
            )
        if now.sensitive:
            why = (
                "sensitive: Kafka does not return its value, "
                + ("so it may have changed; " if not found.known else "")
                + why
            )
        result.append(
            ConfigChange(
                found.key,
                None if now.sensitive else now.value,
                None if now.sensitive else found.to,
                how,
                why,
                shadowed_by=found.shadow,
                sensitive=now.sensitive,
                known=found.known,
                source=now.source,
                removed=found.removed,
            )
        )
    return result


def _how(now: RunningConfig, answer: LiveAnswer | None) -> tuple[How, str]:
    if now.read_only:
        return How.RESTART, "read-only: Kafka reads it at start only"
    if answer is None:
        return How.RESTART, "Kafka was not asked whether it takes it live"
    if answer.at_default is None:
        return How.LIVE_CLUSTER, "cluster-wide: Kafka takes it live, for a broker or as the default"
    if answer.at_broker is None:
        return (
            How.LIVE_BROKER,
            f"per broker: Kafka takes it live for this broker only ({answer.at_default})",
        )
    return How.RESTART, f"Kafka refuses it live: {answer.at_broker}"
