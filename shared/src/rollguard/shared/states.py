"""Kafka's broker states, as `kafka.server:type=KafkaServer,name=BrokerState` reports them.

The numbers are Kafka's own (`org.apache.kafka.metadata.BrokerState`); they travel on the wire
as plain integers, so they must never be renumbered.
"""

from __future__ import annotations

from enum import IntEnum


class BrokerState(IntEnum):
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7
    UNKNOWN = 127

    @property
    def is_ready(self) -> bool:
        """Strimzi's readiness rule: RUNNING or later, but not UNKNOWN.

        A broker in controlled shutdown still serves its partitions until it has handed
        leadership away, so 6 and 7 count as ready, as they do for Strimzi's agent.
        """
        return self >= BrokerState.RUNNING and self is not BrokerState.UNKNOWN

    @classmethod
    def parse(cls, value: object) -> BrokerState:
        """Read a state from a JMX or JSON value (an int, or a numeric string for a Byte).

        Raises ValueError naming the value when it is not one of Kafka's states.
        """
        if isinstance(value, bool):
            raise ValueError(f"broker state {value!r} is not a number")
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ValueError(f"broker state {value!r} is not a number") from None
        if not isinstance(value, int):
            raise ValueError(f"broker state {value!r} is not a number")
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(str(int(s)) for s in cls)
            raise ValueError(f"broker state {value} is not one of Kafka's ({known})") from None
