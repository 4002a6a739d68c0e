"""Records the answers tests/unit/test_config_diff.py is checked against, from a real broker.

    .venv/bin/python tests/configs/record.py

Starts 3 combined KRaft nodes of the newest Kafka from Maven jars (`make kafka`), their files
with `ssl.truststore.password` (a sensitive key, unused by the PLAINTEXT listeners),
`num.network.threads=4` and `log.cleaner.threads=2` besides the harness's own, then sets with
Kafka's own `kafka-configs` (ConfigCommand): for broker 0 `num.io.threads=6` and
`log.retention.ms=3600000`, as the cluster default `log.cleaner.threads=3`. Writes:

- `kafka-<version>-broker-0.json`: kafka-python's DescribeConfigs answer for BROKER 0
  (include_synonyms, every key);
- `kafka-<version>-validate.json`: for each key and value of VALIDATED, what Kafka's
  IncrementalAlterConfigs with validate_only said at the default BROKER resource "" and at
  broker 0's (null: accepted; else its error message).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from rollguard.peers.realkafka import NEWEST, KafkaCluster, kafka_configs
from rollguard.roller.kafka_admin import KafkaObserver
from rollguard.roller.roll.configs.kafka import KafkaConfigs

HERE = Path(__file__).parent
EXTRA = {
    "ssl.truststore.password": "recorded-secret",
    "num.network.threads": "4",
    "log.cleaner.threads": "2",
}
VALIDATED = [
    ("num.io.threads", "9"),
    ("log.cleaner.threads", "4"),
    ("log.retention.ms", "1000"),
    ("message.max.bytes", "2000000"),
    ("log.segment.bytes", "2097152"),
    ("max.connections", "1000"),
    ("num.network.threads", "5"),
    ("listeners", "PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:2"),
    ("advertised.listeners", "PLAINTEXT://127.0.0.1:1"),
    ("log.retention.hours", "24"),
    ("log.dirs", "/elsewhere"),
    ("node.id", "7"),
    ("process.roles", "broker"),
    ("ssl.keystore.password", "not-a-real-one"),
    ("ssl.truststore.password", "not-a-real-one"),
    ("listener.name.plaintext.ssl.keystore.password", "not-a-real-one"),
    ("no.such.key", "1"),
    ("num.io.threads", "not-a-number"),
]


def configs(kafka: KafkaCluster, *args: str) -> None:
    kafka_configs(
        kafka.lib,
        "--bootstrap-server",
        kafka.nodes[0].bootstrap,
        *args,
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        kafka = KafkaCluster(Path(folder), combined=3, heap="256m", extra=EXTRA)
        with kafka:
            configs(kafka, "--entity-type", "brokers", "--entity-name", "0", "--alter",
                    "--add-config", "num.io.threads=6,log.retention.ms=3600000")  # fmt: skip
            configs(kafka, "--entity-type", "brokers", "--entity-default", "--alter",
                    "--add-config", "log.cleaner.threads=3")  # fmt: skip
            reader = KafkaConfigs(KafkaObserver(kafka.bootstrap))
            try:
                answer = reader.describe_raw(0)
                said = [
                    {
                        "key": key,
                        "value": value,
                        "atDefault": reader.validate_raw(None, key, value),
                        "atBroker": reader.validate_raw(0, key, value),
                    }
                    for key, value in VALIDATED
                ]
            finally:
                reader.close()
    # The recorded file paths and ports are the test cluster's: kept as Kafka said them.
    (HERE / f"kafka-{NEWEST}-broker-0.json").write_text(
        json.dumps(answer, indent=1, sort_keys=True) + "\n"
    )
    (HERE / f"kafka-{NEWEST}-validate.json").write_text(
        json.dumps(said, indent=1, sort_keys=True) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
