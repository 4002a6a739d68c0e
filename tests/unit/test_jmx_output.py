"""Classifying what jmxquery's jar prints (captured from the real jar and the test broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollguard.agent.jmx import read_credentials, service_url
from rollguard.agent.jmx_jmxquery import parse_output
from rollguard.agent.readings import FailureReason, SampleError

URL = "service:jmx:rmi:///jndi/rmi://127.0.0.1:9999/jmxrmi"

GOOD = b"""[
{"mBeanName" : "kafka.server:type=KafkaServer,name=BrokerState", "attribute" : "Value", "attributeType" : "Byte", "value" : "2"},
{"mBeanName" : "kafka.log:type=LogManager,name=remainingLogsToRecover,dir=/d", "attribute" : "Value", "attributeType" : "Integer", "value" : 10}]
"""  # noqa: E501
REFUSED = b"""{ "error": "connection-error", "message":"Failed to retrieve RMIServer stub: javax.naming.ServiceUnavailableException [Root exception is java.rmi.ConnectException: Connection refused to host: 127.0.0.1; nested exception is: \n\tjava.net.ConnectException: Connection refused]"}"""  # noqa: E501
AUTH = b"""Exception in thread "main" java.lang.SecurityException: Authentication failed
\tat TestBroker.lambda$run$2(TestBroker.java:167)
\tat com.outlyer.jmx.jmxquery.JMXQuery.main(JMXQuery.java:42)"""
CRASH = b"""Exception in thread "main" javax.management.InstanceNotFoundException: kafka.log:x
\tat java.management/com.sun.jmx.interceptor.DefaultMBeanServerInterceptor.getMBean(X.java:1)"""


def test_values_are_read_with_names_and_raw_types() -> None:
    values = parse_output(0, GOOD, b"", URL)
    assert [(v.object_name.split(",")[1], v.value) for v in values] == [
        ("name=BrokerState", "2"),
        ("name=remainingLogsToRecover", 10),
    ]


@pytest.mark.parametrize(
    ("code", "stdout", "stderr", "reason", "text"),
    [
        (2, REFUSED, b"", FailureReason.JMX_UNREACHABLE, "Connection refused"),
        (1, b"", AUTH, FailureReason.JMX_AUTH_FAILED, "refused the credentials"),
        (1, b"", CRASH, FailureReason.JMX_ERROR, "InstanceNotFoundException"),
        (0, b"garbage", b"", FailureReason.JMX_ERROR, "garbage"),
        (0, b'[{"nope": 1}]', b"", FailureReason.JMX_ERROR, "unexpected"),
        (2, b'{"error": "query-error", "message": "bad"}', b"", FailureReason.JMX_ERROR, "bad"),
    ],
)
def test_failures_are_classified_and_explained(
    code: int, stdout: bytes, stderr: bytes, reason: FailureReason, text: str
) -> None:
    with pytest.raises(SampleError) as raised:
        parse_output(code, stdout, stderr, URL)
    assert raised.value.reason is reason
    assert text in raised.value.message
    assert "\n" not in raised.value.message


def test_host_and_port_become_the_standard_rmi_url() -> None:
    assert service_url("127.0.0.1:9999") == URL
    assert service_url("service:jmx:rmi://h/x") == "service:jmx:rmi://h/x"
    for bad in ("nohost", "h:0", "h:99999", ":9", "h:x"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            service_url(bad)


def test_credentials_file_takes_the_first_user_password_line(tmp_path: Path) -> None:
    path = tmp_path / "jmx"
    path.write_text("# monitoring\n\nmonitor  s3cret\nother x\n")
    credentials = read_credentials(path)
    assert (credentials.username, credentials.password) == ("monitor", "s3cret")
    assert "s3cret" not in repr(credentials)
    path.write_text("just-one-field\n")
    with pytest.raises(ValueError, match="USERNAME PASSWORD"):
        read_credentials(path)
