"""`make demo`: a broker goes through log recovery, and curl watches it through the agent.

Everything runs on this machine: fresh certificates from `rollguard-certs`, the Java test broker
(Kafka's exact MBeans over remote JMX; the Kafka broker itself is simulated), `rollguard-agent`,
and curl with a client certificate, as an operator would run it.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "demo"
BIN = Path(sys.executable).parent
DEADLINE = 150  # seconds; the demo must finish well inside three minutes


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def run(*command: str) -> None:
    print("$ " + shlex.join(command), flush=True)
    subprocess.run(command, check=True)


def wait_for_line(process: subprocess.Popen[str], pattern: str, timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise SystemExit(f"demo: process exited early (code {process.wait()})")
        match = re.search(pattern, line)
        if match:
            return match
    raise SystemExit(f"demo: no line matching {pattern!r} within {timeout}s")


def main() -> int:
    shutil.rmtree(WORK, ignore_errors=True)
    pki = WORK / "pki"
    processes: list[subprocess.Popen[str]] = []
    started = time.monotonic()
    try:
        say("1. A CA, a server certificate for the agent, a client certificate for the roller")
        certs = str(BIN / "rollguard-certs")
        run(certs, "init-ca", "--dir", str(pki))
        run(
            certs,
            "issue-server",
            "--dir",
            str(pki),
            "agent",
            "--dns",
            "localhost",
            "--ip",
            "127.0.0.1",
        )
        run(certs, "issue-client", "--dir", str(pki), "roller")

        say(
            "2. A broker that restarts after an unclean stop: 3 s STARTING, then ~20 s of log "
            "recovery over 2 log dirs x 2 recovery threads (simulated by the Java test broker)"
        )
        broker = subprocess.Popen(
            [
                "java",
                "-cp",
                str(ROOT / "build" / "testbroker"),
                "TestBroker",
                "--starting-ms",
                "3000",
                "--recovery-ms",
                "20000",
                "--dirs",
                "2",
                "--threads",
                "2",
                "--logs",
                "150",
                "--segments",
                "4000",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        processes.append(broker)
        jmx = wait_for_line(broker, r"JMX_PORT=(\d+)", 30).group(1)
        print(f"broker JMX on 127.0.0.1:{jmx}")

        say("3. The agent beside it: JMX in, mutual TLS out")
        agent_command = [
            str(BIN / "rollguard-agent"),
            "--listen",
            "127.0.0.1:0",
            "--probe-listen",
            "127.0.0.1:0",
            "--cert",
            str(pki / "agent.crt"),
            "--key",
            str(pki / "agent.key"),
            "--cacert",
            str(pki / "ca.crt"),
            "--jmx",
            f"127.0.0.1:{jmx}",
            "--ready-file",
            str(WORK / "kafka-ready"),
        ]
        print("$ " + shlex.join(agent_command))
        agent = subprocess.Popen(
            agent_command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        processes.append(agent)
        ports = wait_for_line(agent, r"https://127\.0\.0\.1:(\d+).*http://127\.0\.0\.1:(\d+)", 30)
        api, probe = ports.group(1), ports.group(2)

        say("4. An operator asks the agent, once a second, until the broker is RUNNING")
        curl = [
            "curl",
            "-sS",
            "--cert",
            str(pki / "roller.crt"),
            "--key",
            str(pki / "roller.key"),
            "--cacert",
            str(pki / "ca.crt"),
            f"https://127.0.0.1:{api}/v1/broker-state",
        ]
        print("$ " + shlex.join(curl))
        while time.monotonic() - started < DEADLINE:
            done = subprocess.run(curl, capture_output=True, text=True, timeout=10)
            stamp = f"[{time.monotonic() - started:5.1f}s]"
            print(f"{stamp} {done.stdout.strip() or done.stderr.strip()}", flush=True)
            try:
                if json.loads(done.stdout).get("brokerState") == 3:
                    break
            except ValueError:
                pass
            time.sleep(1)
        else:
            raise SystemExit("demo: the broker did not reach RUNNING in time")

        say("5. The probe port: readiness and Prometheus metrics")
        ready = subprocess.run(
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                f"http://127.0.0.1:{probe}/v1/ready",
            ],
            capture_output=True,
            text=True,
        )
        print(
            f"GET /v1/ready -> {ready.stdout}; ready file exists: {(WORK / 'kafka-ready').exists()}"
        )
        metrics = subprocess.run(
            ["curl", "-s", f"http://127.0.0.1:{probe}/metrics"], capture_output=True, text=True
        ).stdout
        for line in metrics.splitlines():
            if line.startswith("rollguard_agent_") and "errors" not in line:
                print(line)
        say(f"done in {time.monotonic() - started:.0f}s; files in {WORK}")
        return 0
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    sys.exit(main())
