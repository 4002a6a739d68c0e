"""The root of rollguard's exceptions, and their tree, drawn once.

Exceptions are classified by what the caller does next, not by where they came from, and only
by what some caller does branch on. Under `RollguardError`, four categories:

- `ConfigError`: configuration. A setting, or a file or object a setting names, cannot be used:
  tell the user, exit 2; nothing was started (the CLI's one reading: `shared.cli.run_command`).
- `RetryLater`: a peer or an API that may answer shortly (unreachable, restarting, throttled,
  a lease or a lag that cannot be read just now). A caller with a budget asks again within it
  (the roll's look at Kafka, `Observer.cluster`; the platform's outage rule; the lease's
  renewal; a gate); one without fails with it (exit 1).
- `NodeFailed`: fatal for one node (or one connector). Its restart or install failed, its
  command could not run, it did not reach the state waited for: record that one as failed and
  act on it no more; the others are not at fault (a roll waits for the rest of that restart,
  then stops; an offsets reset puts the connector back).
- `WireFormatError`: a peer broke the wire contract. Asking again brings the same answer: the
  answer is unusable (an agent's malformed report is an unreadable agent).

Any other `RollguardError` has no category, because every caller does the same with it: stop.
Asking again will not help and going on would not be safe (the lease lost, the journal
unwritable, an API's refusal, the roll's own failure): a roll's journal says why; exit 1.

Library errors (kafka-python, lightkube and httpx, ssl, OSError, json) are translated into one
of these by the adapter that meets them, the message naming the call and the cause (the original
chained as `__cause__`, or left out where the message says all of it):
`rollguard.roller.kafka_admin`, `rollguard.roller.kubernetes`, `rollguard.roller.configmap`,
`rollguard.roller.connect.client`, `rollguard.roller.host_commands`, the lease stores. The
agents' client answers values, not exceptions: `AgentUnavailable` when an agent cannot be read.

One origin group is kept, because a caller branches on it (the pause gate reads a lease it may
not reach: `except LeaseError`); its members belong to different categories, so it has none of
its own and rollguard raises only its members (a class named `& LeaseError` below is also the
group's).

Every class, its module (under `rollguard.`) and its category; tests/sim/test_errors.py checks this
drawing against the classes the installed modules define, and that a caller branches on each
category:

    RollguardError                           shared.errors
     +-- ConfigError                         shared.errors
     |    +-- TlsFileError                   shared.errors
     |    +-- ExpectationsError              shared.expectations
     |    +-- MissingKey                     roller.configmap
     |    +-- UnsupportedVersion             roller.connect.versions
     |    +-- CanaryRefused                  roller.roll.canary.client
     |    +-- SettingsError                  roller.controller.settings
     +-- RetryLater                          shared.errors
     |    +-- PlatformUnavailable            roller.platform
     |    |    +-- KubernetesUnavailable     roller.kubernetes
     |    +-- AdminApiError                  roller.kafka_admin
     |    +-- LagUnknown                     roller.kafka_admin
     |    +-- LeaseUnavailable               roller.roll.stores.lease & LeaseError
     +-- NodeFailed                          shared.errors
     |    +-- RestartError                   roller.platform
     |    +-- CommandError                   roller.host_commands
     |    |    +-- CommandTimeout            roller.host_commands
     |    +-- WaitTimeout                    roller.connect.operations
     |    +-- StateNotReached                roller.connect.operations
     +-- WireFormatError                     shared.errors
     +-- RollFailed                          roller.roll.rules.settings
     +-- JournalError                        roller.roll.stores.journal
     +-- KubernetesRefused                   roller.kubernetes
     +-- ConnectError                        roller.connect.client
     +-- OffsetsError                        roller.connect.offsets
     +-- LeaseError                          roller.roll.stores.lease
          +-- LeaseHeld                      roller.roll.stores.lease
          +-- LeaseLost                      roller.roll.stores.lease
          +-- NotRunning                     roller.roll.stores.lease

Not RollguardErrors: signals between a module and its own loop or caller, each turned into a
value, an exit code or one of the errors above before it goes further:

    AgentCrashed         agent.server              the agent's exit 1 (agent.cli)
    SampleError          agent.readings            a failed sample's reason (agent.sampler)
    NotReady             shared.retry              "not yet" inside a retry loop
    PropertiesError      shared.javaprops          a ConfigError naming the file and line
    _NotReady            roller.agent_client       an AgentUnavailable
    _ServerError         roller.agent_client       an AgentUnavailable
    _Rebalancing         roller.connect.client     retried, then a ConnectError
    _Invalid             roller.inventory          a ConfigError naming the inventory
    UnknownRelease       roller.roll.upgrades.releases  a ConfigError naming --kafka-version
    _Interrupted         spark.cli                 SIGTERM: exit 3

`rollguard.shared.cli.run_command` turns a ConfigError into exit 2 and any other RollguardError
into exit 1.
"""

from __future__ import annotations


class RollguardError(Exception):
    """Base class of every error rollguard raises on purpose."""


class ConfigError(RollguardError):
    """A setting or a file named by a setting cannot be used; the message names it. Exit 2:
    nothing was started."""


class TlsFileError(ConfigError):
    """A certificate, private key or CA bundle cannot be used for TLS."""


class RetryLater(RollguardError):
    """A peer or an API did not answer, or answered "not now": the same call may work shortly.
    A caller with a budget asks again within it; one without fails with it."""


class NodeFailed(RollguardError):
    """An action on one node (or one connector) failed: that one is failed, the others are not
    at fault."""


class WireFormatError(RollguardError):
    """A document received from a peer does not follow the wire contract."""
