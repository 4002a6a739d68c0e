"""A cluster's roll settings: the very options of `rollguard roll`, validated by the same code.

Each setting is a flag of `rollguard roll`, by its name without dashes in front: the
annotation `rollguard.io/<flag>` on a StatefulSet of the cluster (`rollguard.io/window: "Sat
02:00-05:00 UTC"`), or the key `<flag>` of the ConfigMap the annotation `rollguard.io/settings`
names (a repeated flag takes one value a line). Over the controller's own environment
(`ROLLGUARD_<FLAG>`: the Deployment's, the chart's values), the ConfigMap's keys, and over those
the annotations; two StatefulSets of a cluster giving one annotation two values is refused. The
controller sets what is its to set: the namespace, the pods' selector, the roll id (and
`--resume`), `--kafka-version` (the pod template's), `--compare-config` (on when the template
mounts the properties file; a setting may turn it off), where events are written, the output.

Everything goes through `RollOptions.load`, as a command line does: a value that does not
convert, a missing `bootstrap`, two settings that do not go together, each is a `SettingsError`
naming the annotation (or the ConfigMap's key) and the value, and nothing is rolled.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollguard.roller.controller.names import OWN, PREFIX
from rollguard.roller.options import ENV_PREFIX
from rollguard.roller.roll.cli.options import RollOptions
from rollguard.shared.errors import ConfigError

__all__ = ["ClusterSettings", "SettingsError", "cluster_options", "flag_of"]

# The flags the controller sets itself, and why a cluster may not.
THE_CONTROLLER_S = {
    "inventory": "the controller rolls pods, never an inventory",
    "namespace": "the StatefulSet's own namespace is the roll's",
    "selector": f"give the pods' selector as {PREFIX}selector",
    "state-dir": "the controller's --state-dir keeps every cluster's events",
    "roll-id": "the controller names each roll after its cluster and its change",
    "resume": "the controller resumes a roll from its journal by itself",
    "output": "the controller's --output is its own",
    "log-format": "the controller's --log-format is its own",
    "metrics-listen": "the controller's --metrics-listen serves every roll's metrics",
    "all": "restarting every pod is asked with `kubectl rollout restart statefulset NAME`",
    "only": "a standing --only would leave the other pods out of every roll",
    "kafka-version": f"the target version is the pod template's annotation {PREFIX}kafka-version "
    "(or its image's tag)",
}
_VARIABLE = re.compile(rf"{ENV_PREFIX}[A-Z0-9_]+")
_FLAG = re.compile(r"--[a-z0-9-]+")
_OR_VARIABLE = re.compile(rf" \(or {ENV_PREFIX}[A-Z0-9_]+\)")


class SettingsError(ConfigError):
    """A cluster's settings cannot be used: the message names where each bad value came from."""


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """What a cluster's settings are made of: each flag's text, and where it came from
    (`annotation rollguard.io/window`, `ConfigMap kafka-rollguard key window`)."""

    values: Mapping[str, str]  # flag -> text
    sources: Mapping[str, str]  # flag -> where it was given

    def fingerprint(self) -> str:
        return "\n".join(f"{k}={v}" for k, v in sorted(self.values.items()))


def flag_of(annotation: str) -> str | None:
    """The flag an annotation sets (`rollguard.io/operation-timeout` -> `operation-timeout`);
    None for the controller's own annotations and any other prefix's."""
    if not annotation.startswith(PREFIX) or annotation in OWN:
        return None
    return annotation.removeprefix(PREFIX)


def gather(
    per_statefulset: Mapping[str, Mapping[str, str]],
    configmap: Mapping[str, str] | None = None,
    configmap_name: str = "",
) -> ClusterSettings:
    """The cluster's settings from its ConfigMap's keys and, over them, its StatefulSets'
    annotations (by StatefulSet name). SettingsError for an unknown flag, one the controller
    sets itself, or one annotation given two values."""
    known = _roll_flags()
    values: dict[str, str] = {}
    sources: dict[str, str] = {}

    def put(flag: str, text: str, where: str) -> None:
        if flag not in known:
            raise SettingsError(
                f"{where}: {flag!r} is no setting (the flags of `rollguard roll --help` are, "
                "without their dashes)"
            )
        if flag in THE_CONTROLLER_S:
            raise SettingsError(f"{where}: not a cluster's setting: {THE_CONTROLLER_S[flag]}")
        values[flag], sources[flag] = text, where

    for key, text in sorted((configmap or {}).items()):
        put(key.strip(), text, f"ConfigMap {configmap_name} key {key}")
    given: dict[str, tuple[str, str]] = {}
    for name, given_there in sorted(per_statefulset.items()):
        for annotation, text in sorted(given_there.items()):
            flag = flag_of(annotation)
            if flag is None:
                continue
            where = f"annotation {annotation} (StatefulSet {name})"
            if flag in given and given[flag][1] != text:
                raise SettingsError(
                    f"annotation {annotation}: StatefulSets {given[flag][0]} and {name} of one "
                    f"cluster give it two values ({given[flag][1]!r}, {text!r})"
                )
            if flag not in given:  # the same value on another StatefulSet: said once
                given[flag] = (name, text)
                put(flag, text, where)
    return ClusterSettings(values, sources)


def cluster_options(
    settings: ClusterSettings,
    environ: Mapping[str, str],
    *,
    namespace: str,
    selector: str,
    state_dir: Path,
    kafka_version: str | None,
    compare_config: bool,
    roll_id: str,
    resume: bool,
) -> RollOptions:
    """`rollguard roll`'s options for one roll of the cluster: the controller's environment, the
    cluster's settings over it, and what the controller sets (see the module). SettingsError
    naming the annotation or key and the value of whatever does not validate."""
    variables = {k: v for k, v in environ.items() if k.startswith(ENV_PREFIX)}
    labels: dict[str, str] = {}
    for flag, text in settings.values.items():
        variable = _variable(flag)
        variables[variable] = text
        labels[variable] = labels[f"--{flag}"] = f"{settings.sources[flag]}={text!r}"
    own = {
        "namespace": namespace,
        "selector": selector,
        "state-dir": str(state_dir),
        "output": "text",
        "log-format": environ.get(_variable("log-format"), "text"),
        "kafka-version": kafka_version,
        "resume" if resume else "roll-id": roll_id,
    }
    for flag in THE_CONTROLLER_S:  # the controller's environment does not set them either
        variables.pop(_variable(flag), None)
    variables.update({_variable(k): v for k, v in own.items() if v is not None})
    if "compare-config" not in settings.values:
        variables[_variable("compare-config")] = "true" if compare_config else "false"
    try:
        return RollOptions.load(argparse.Namespace(), variables, ENV_PREFIX, command="roll")
    except ConfigError as exc:
        raise SettingsError(_named(str(exc), labels)) from None


@functools.cache
def _roll_flags() -> dict[str, Any]:
    """`rollguard roll`'s flags by name (read once: every look at every cluster asks)."""
    return {f.name: f for f in RollOptions.flags()}


def _variable(flag: str) -> str:
    return str(_roll_flags()[flag].env(ENV_PREFIX))


def _named(message: str, labels: Mapping[str, str]) -> str:
    """The options' message with each variable or flag it names replaced by where the cluster
    gave it, and its value: `annotation rollguard.io/operation-timeout (StatefulSet kafka)=
    '5 minutes': ...`. A required flag nobody gave is named as the annotation that gives it."""
    message = _OR_VARIABLE.sub("", message)

    def name(found: re.Match[str]) -> str:
        text = found.group(0)
        if text in labels:
            return labels[text]
        flag = text.removeprefix("--") if text.startswith("--") else None
        if flag is None and text.startswith(ENV_PREFIX):
            flag = text.removeprefix(ENV_PREFIX).lower().replace("_", "-")
        return f"{PREFIX}{flag}" if flag else text

    return _FLAG.sub(name, _VARIABLE.sub(name, message))
