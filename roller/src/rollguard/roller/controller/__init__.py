"""`rollguard controller`: rollguard running itself on Kubernetes, rolling the Kafka
StatefulSets that opt in whenever they change, with every rule a roll has.

It watches the StatefulSets labelled `rollguard.io/roll: "true"` (one namespace, several, or
all) and rolls a cluster (its StatefulSets grouped by `rollguard.io/cluster`) when its template
changed (`helm upgrade`, `kubectl rollout restart`), when the properties file its pods mount
from a ConfigMap changed (live where Kafka takes it, a restart only where it must), or when the
Kafka version its template names changed (each pod verified on it). A StatefulSet Kubernetes
restarts itself (updateStrategy RollingUpdate) gets a warning and nothing else.

    cli.py         the command and its options (options.py)
    serve.py       the process: permissions, leadership, kopf
    leadership.py  two replicas, one acting: a coordination.k8s.io Lease
    handlers.py    kopf's watches, each a thin call into the reconciler
    reconciler.py  the loop over the clusters: look, decide, act
    rolls.py       one roll of a cluster, as `rollguard roll` runs it, told as it goes
    decide.py      what to do with a cluster now (pure), from clusters.py, status.py,
                   settings.py (a cluster's settings through the roll's own options)
    telling.py     a roll's events as Kubernetes Events (pure); hold.py, the hold annotation
                   as one of the roll's gates; observe.py and access.py, the API's reads
"""
