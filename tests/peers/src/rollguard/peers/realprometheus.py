"""A real Prometheus for tests: Debian's `prometheus` binary, fetched by `make prometheus`
(scripts/prometheus-fetch) into a cache outside the clone, run on 127.0.0.1.

`PrometheusServer(folder, targets=[...], rules=...)` writes a config that scrapes `targets`
and evaluates `rules` every second (a test's alert fires within two or three seconds of its
gauge), keeps its TSDB in `folder`, starts the binary on a free loopback port and waits until
`/-/ready` answers 200. `stop()` is SIGTERM to its PID (SIGKILL after 10 s); `start()` again
serves the same URL, so a test can take Prometheus away and bring it back.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollguard.peers.processes import free_port, wait_until
from rollguard.peers.spawn import Starts, alive, read_log, start_logged, stop_process

BINARY = Path("usr/bin/prometheus")
STAMP = ".fetched"  # scripts/prometheus-fetch's, beside a complete unpacking
INTERVAL = "1s"  # scrape and rule evaluation


class PrometheusMissing(RuntimeError):
    """No fetched Prometheus in the cache (run `make prometheus`)."""


def cache_root() -> Path:
    default = Path.home() / ".cache" / "rollguard" / "prometheus"
    return Path(os.environ.get("ROLLGUARD_PROMETHEUS_CACHE") or default)


def prometheus_binary() -> Path:
    """The newest fetched binary; PrometheusMissing naming where it was looked for."""
    root = cache_root()
    found = sorted(
        folder / BINARY
        for folder in (root.glob("*") if root.is_dir() else ())
        if (folder / STAMP).is_file() and (folder / BINARY).is_file()
    )
    if not found:
        raise PrometheusMissing(
            f"no Prometheus binary under {root}: run `make prometheus` (Debian's package, "
            "fetched with apt-get download and unpacked, not installed)"
        )
    return found[-1]


def config(targets: Sequence[str], rule_file: Path | None) -> str:
    """prometheus.yml: one job scraping `targets`, `rule_file` evaluated, every second (JSON is
    YAML)."""
    document: dict[str, Any] = {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
        "scrape_configs": [
            {
                "job_name": "rollguard-test",
                "scrape_interval": INTERVAL,
                "scrape_timeout": INTERVAL,
                "static_configs": [{"targets": list(targets)}],
            }
        ],
    }
    if rule_file is not None:
        document["rule_files"] = [str(rule_file)]
    return json.dumps(document, indent=1)


class PrometheusServer(Starts):
    """A real Prometheus scraping `targets`, with `rules` (a rule file's YAML) if given."""

    def __init__(
        self,
        folder: Path,
        *,
        targets: Sequence[str] = (),
        rules: str = "",
        binary: Path | None = None,
    ) -> None:
        self.folder = folder
        self.binary = binary or prometheus_binary()
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)
        rule_file = None
        if rules:
            rule_file = folder / "rules.yml"
            rule_file.write_text(rules)
        self.config_file = folder / "prometheus.yml"
        self.config_file.write_text(config(targets, rule_file))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.folder / "prometheus.log"

    def running(self) -> bool:
        return alive(self.process)

    def start(self, timeout: float = 60) -> None:
        """Start it and wait until `/-/ready` is 200; fails if it exits first."""
        if self.running():
            raise RuntimeError("Prometheus is already running")
        command = [
            str(self.binary),
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self.process = start_logged(command, self.log_file, cwd=self.folder)
        wait_until(self._ready, timeout, interval=0.1, what=f"Prometheus at {self.url} ready")

    def _ready(self) -> bool:
        if not self.running():
            tail = read_log(self.log_file)[-2000:]
            raise AssertionError(f"Prometheus exited:\n{tail}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's series (the test's own view, beside the roller's)."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
        with urllib.request.urlopen(address, timeout=5) as answer:
            body = json.loads(answer.read())
        result = body["data"]["result"]
        assert isinstance(result, list), body
        return result

    def queries_answered(self) -> int:
        """Instant queries answered so far (Prometheus' own counter, from its /metrics): a
        client asking at each of its polls is seen asking, without a clock."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        total = 0.0
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name.startswith("prometheus_http_requests_total{") and (
                'handler="/api/v1/query"' in name
            ):
                total += float(value)
        return int(total)

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM to its PID; SIGKILL if it outlasts `timeout`."""
        stop_process(self.process, timeout)
