"""nginx as a reference HTTPS server for the agent benchmark.

bench/agent.py loads this file (by path, as `bench_nginx`), calls `ensure_nginx()` once, then
runs `Nginx(ca, cert, key, body)` as a context manager next to the agent: the same certificates,
mutual TLS (TLSv1.2 and TLSv1.3 only), and `GET /v1/broker-state` answering the same JSON body
as the agent, so the load generator can compare requests per second, latency and memory
(`Nginx.pid` and `Nginx.worker_pids()`). Everything nginx needs lives in a fresh temporary
folder: nothing is read from /etc/nginx or written to /var, and the Debian nginx service is not
used.

    .venv/bin/python bench/nginx.py    # self-test: starts nginx and checks it with curl
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from rollguard.peers.processes import free_port

PACKAGES = ("nginx", "nginx-light")  # Debian 12: `nginx` is the server, nginx-light adds a module
_NO_PACKAGE_LISTS = re.compile(
    r"Unable to locate package|has no installation candidate|Failed to fetch|404\s+Not Found"
)


def _find_nginx() -> str | None:
    if Path("/usr/sbin/nginx").is_file() and os.access("/usr/sbin/nginx", os.X_OK):
        return "/usr/sbin/nginx"
    return shutil.which("nginx")


def ensure_nginx() -> str:
    """The path of the nginx binary, installing the Debian package first if it is missing."""
    found = _find_nginx()
    if found:
        return found
    if shutil.which("apt-get") is None:
        raise RuntimeError("nginx is not installed and there is no apt-get to install it")
    if os.geteuid() != 0:
        raise RuntimeError(
            "nginx is not installed; installing it needs root: apt-get install nginx"
        )
    env = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    errors: list[str] = []
    for attempt in range(2):
        for package in PACKAGES:
            done = subprocess.run(
                ["apt-get", "install", "-y", "--no-install-recommends",
                 "-o", "DPkg::Lock::Timeout=120", package],
                env=env, capture_output=True, text=True, check=False,
            )  # fmt: skip
            found = _find_nginx()
            if done.returncode == 0 and found:
                return found
            errors.append(f"{package}: {_last_line(done.stderr or done.stdout)}")
        if attempt == 0 and any(_NO_PACKAGE_LISTS.search(e) for e in errors):
            update = subprocess.run(
                ["apt-get", "update"], env=env, capture_output=True, text=True, check=False
            )
            if update.returncode != 0:
                errors.append(f"apt-get update: {_last_line(update.stderr or update.stdout)}")
                break
            errors.clear()
            continue
        break
    raise RuntimeError("could not install nginx with apt-get (" + "; ".join(errors) + ")")


def nginx_version(binary: str | None = None) -> str:
    """`nginx -v`, e.g. "nginx/1.22.1"."""
    done = subprocess.run(
        [binary or ensure_nginx(), "-v"], capture_output=True, text=True, check=False
    )
    return (done.stderr or done.stdout).strip().removeprefix("nginx version: ")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _nginx_string(body: bytes) -> bytes:
    """`body` as an nginx single-quoted string, `$` kept literal through the `$dollar` variable."""
    escaped = body.replace(b"\\", b"\\\\").replace(b"'", b"\\'")
    return b"'" + escaped.replace(b"$", b"${dollar}") + b"'"


class Nginx:
    """nginx serving `body` at /v1/broker-state over mutual TLS on 127.0.0.1, a free port."""

    BIND_ATTEMPTS = 5
    START_TIMEOUT = 15.0
    STOP_TIMEOUT = 10.0

    def __init__(self, ca: Path, cert: Path, key: Path, body: bytes, workers: int = 1) -> None:
        self.ca, self.cert, self.key = Path(ca).resolve(), Path(cert).resolve(), Path(key).resolve()
        self.body = body
        self.workers = workers
        self.port = 0
        self.url = ""
        self.dir: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The master process."""
        if self.process is None:
            raise RuntimeError("nginx is not running")
        return self.process.pid

    def worker_pids(self) -> list[int]:
        """The children of the master process (its workers), from /proc."""
        master = self.pid
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone meanwhile
            if int(fields[1]) == master:
                children.append(int(stat.parent.name))
        return sorted(children)

    def __enter__(self) -> Nginx:
        binary = ensure_nginx()
        self.dir = Path(tempfile.mkdtemp(prefix="rollguard-nginx-"))
        self.dir.chmod(0o755)  # workers run as an unprivileged user when we are root
        try:
            for _ in range(self.BIND_ATTEMPTS):
                self.port = free_port()
                self.url = f"https://127.0.0.1:{self.port}"
                conf = self.dir / "nginx.conf"
                conf.write_bytes(self._config())
                shutil.rmtree(self.dir / "logs", ignore_errors=True)  # this attempt's only
                (self.dir / "logs").mkdir()
                stderr = (self.dir / "logs" / "stderr.log").open("wb")
                with stderr:
                    self.process = subprocess.Popen(
                        [binary, "-p", f"{self.dir}/", "-c", str(conf), "-g", "daemon off;"],
                        stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                    )  # fmt: skip
                if self._wait_ready():
                    return self
                log = self._logs()
                self.process = None
                if "Address already in use" not in log:
                    raise RuntimeError(f"nginx did not start: {_last_line(log)}")
            raise RuntimeError(f"nginx could not bind a free port in {self.BIND_ATTEMPTS} tries")
        except BaseException:
            self._stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    def _config(self) -> bytes:
        d = self.dir
        assert d is not None
        temp = "\n".join(
            f"    {name}_temp_path {d}/temp/{name};"
            for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        head = f"""\
worker_processes {self.workers};
pid {d}/nginx.pid;
lock_file {d}/nginx.lock;
error_log {d}/logs/error.log warn;

events {{
    worker_connections 1024;
}}

http {{
    access_log off;
{temp}
    default_type application/octet-stream;
    server_tokens off;
    geo $dollar {{
        default "$";
    }}

    server {{
        listen 127.0.0.1:{self.port} ssl;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate {self.cert};
        ssl_certificate_key {self.key};
        ssl_client_certificate {self.ca};
        ssl_verify_client on;
        keepalive_requests 1000000;
        keepalive_timeout 75s;

        location = /v1/broker-state {{
            default_type application/json;
            return 200 """
        tail = """;
        }
        location / {
            return 404;
        }
    }
}
"""
        (d / "temp").mkdir(exist_ok=True)
        return head.encode() + _nginx_string(self.body) + tail.encode()

    def _wait_ready(self) -> bool:
        """True once the port completes a TLS handshake and all workers run; False if nginx
        exited; RuntimeError on timeout."""
        assert self.process is not None
        context = ssl.create_default_context(cafile=str(self.ca))
        deadline = time.monotonic() + self.START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with (
                    socket.create_connection(("127.0.0.1", self.port), timeout=1) as raw,
                    context.wrap_socket(raw, server_hostname="127.0.0.1"),
                ):
                    pass
                if len(self.worker_pids()) >= self.workers:
                    return True
            except (OSError, ssl.SSLError):
                pass
            time.sleep(0.02)
        raise RuntimeError(
            f"nginx did not accept TLS on port {self.port} within {self.START_TIMEOUT:.0f}s: "
            + _last_line(self._logs())
        )

    def _logs(self) -> str:
        assert self.dir is not None
        parts = []
        for name in ("stderr.log", "error.log"):
            path = self.dir / "logs" / name
            if path.exists():
                parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)

    def _stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            for sig, timeout in (
                (signal.SIGQUIT, self.STOP_TIMEOUT),
                (signal.SIGTERM, 5.0),
                (signal.SIGKILL, 5.0),
            ):
                process.send_signal(sig)
                try:
                    process.wait(timeout)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def _self_test() -> int:
    from rollguard.peers.processes import make_pki

    failures = 0

    def check(ok: bool, what: str, detail: str = "") -> None:
        nonlocal failures
        failures += not ok
        print(f"{'OK  ' if ok else 'FAIL'} {what}" + (f" ({detail})" if detail and not ok else ""))

    start = time.monotonic()
    binary = ensure_nginx()
    print(f"nginx: {binary}, {nginx_version(binary)} ({time.monotonic() - start:.1f}s)")
    with tempfile.TemporaryDirectory(prefix="rollguard-nginx-pki-") as folder:
        pki = make_pki(Path(folder))  # server certificate: DNS localhost, IP 127.0.0.1

        def curl(url: str, *options: str) -> tuple[int, str, bytes]:
            out = Path(folder) / "out"
            out.unlink(missing_ok=True)
            done = subprocess.run(
                ["curl", "-sS", "--max-time", "10", "-o", str(out), "-w", "%{http_code}",
                 "--cacert", str(pki.ca), *options, url],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            body = out.read_bytes() if out.exists() else b""
            return done.returncode, done.stdout + " " + done.stderr.strip(), body

        client = ("--cert", str(pki.client_cert), "--key", str(pki.client_key))
        bodies = [b'{"brokerState":3}', b'{"note":"it\'s $5 \\\\ \\"ok\\"\\n","x":{"y":[1]}}']
        for n, body in enumerate(bodies):
            start = time.monotonic()
            with Nginx(pki.ca, pki.server_cert, pki.server_key, body, workers=n + 1) as nginx:
                print(f"started {nginx.url} pid {nginx.pid} workers {nginx.worker_pids()} "
                      f"in {time.monotonic() - start:.2f}s")  # fmt: skip
                state = nginx.url + "/v1/broker-state"
                rc, status, got = curl(state, *client)
                check(rc == 0 and status.startswith("200") and got == body,
                      f"client certificate: 200 and the exact body {body!r}",
                      f"curl rc {rc}, {status}, {got!r}")  # fmt: skip
                if n == 0:
                    workers = nginx.worker_pids()
                    check(len(workers) == 1, "one worker process", str(workers))
                    rc, status, got = curl(state, "-i", *client)
                    check(b"Content-Type: application/json" in got, "Content-Type JSON")
                    rc, status, _ = curl(nginx.url + "/v1/other", *client)
                    check(rc == 0 and status.startswith("404"), "other path: 404", status)
                    rc, status, _ = curl(state)
                    check(not status.startswith("200"), "no client certificate: no 200", status)
                    rc, status, _ = curl(state, "--tlsv1.1", "--tls-max", "1.1", *client)
                    check(rc != 0 and not status.startswith("200"), "TLS 1.1: fails", status)
                    rc, status, _ = curl(state, "--tlsv1.2", "--tls-max", "1.2", *client)
                    check(status.startswith("200"), "TLS 1.2: 200", status)
                    for url in (state.replace("127.0.0.1", "localhost"),):
                        rc, status, _ = curl(url, *client)
                        check(status.startswith("200"), "https://localhost: 200", status)
                else:
                    workers = nginx.worker_pids()
                    check(len(workers) == 2, "two worker processes", str(workers))
                folder_used, pid = nginx.dir, nginx.pid
            check(folder_used is not None and not folder_used.exists(), "temp folder removed")
            check(not Path(f"/proc/{pid}").exists(), "master stopped")
    print("FAIL" if failures else "OK: all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(_self_test())
