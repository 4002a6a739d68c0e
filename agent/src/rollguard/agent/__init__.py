r"""The rollguard agent: a sidecar that tells rollers what state its Kafka broker is in.

    broker JVM --JMX--> sampler --> latest sample --> GET /v1/broker-state (mutual TLS)
                                                 \--> GET /v1/ready, /metrics (probe port)

Run it as `rollguard-agent`; see `rollguard.agent.cli` for the flags.
"""
