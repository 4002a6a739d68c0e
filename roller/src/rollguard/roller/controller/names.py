"""The names the controller reads and writes on Kubernetes objects, declared once.

A StatefulSet opts in with the label `rollguard.io/roll: "true"`. StatefulSets of one namespace
that carry the same `rollguard.io/cluster` label are one Kafka cluster (its controllers' and its
brokers' StatefulSets, say), rolled as one; without the label a StatefulSet is a cluster of its
own, named after it. Settings are annotations `rollguard.io/<flag>` (a `rollguard roll` flag),
or keys of the ConfigMap the annotation `rollguard.io/settings` names. A person holds a roll with
`rollguard.io/paused` (any note; removing it lets the roll go on). The pod template's
annotation `rollguard.io/kafka-version` says which Kafka its image runs. rollguard writes
`rollguard.io/status` (what the controller does with the cluster now) and nothing else on a
StatefulSet.
"""

from __future__ import annotations

PREFIX = "rollguard.io/"
OPT_IN = "rollguard.io/roll"  # label, "true": the controller watches this StatefulSet
CLUSTER = "rollguard.io/cluster"  # label: the StatefulSets of one Kafka cluster
SETTINGS = "rollguard.io/settings"  # annotation: a ConfigMap of settings (keys are flags)
PAUSED = "rollguard.io/paused"  # annotation: hold the roll before its next restart
STATUS = "rollguard.io/status"  # annotation, written by the controller
KAFKA_VERSION = "rollguard.io/kafka-version"  # pod template annotation: its image's Kafka
SELECTOR = "rollguard.io/selector"  # annotation: the pods' selector, when the default cannot be
# The annotations on a StatefulSet that are not roll flags (anything else under the prefix must
# be one).
OWN = frozenset({SETTINGS, PAUSED, STATUS, SELECTOR})

LEASE_PREFIX = "rollguard-roll-"  # one Lease per cluster: rollguard-roll-<cluster>
COMPONENT = "rollguard"  # the Events' source, as `kubectl describe` shows it (From)


def paused_note(annotations: dict[str, str]) -> str:
    """The hold annotation's note ("" when the roll is not held: absent, empty or "false")."""
    note = annotations.get(PAUSED, "").strip()
    return "" if note.lower() in ("", "false") else note
