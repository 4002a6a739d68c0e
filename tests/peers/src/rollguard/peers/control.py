"""The host's service manager of a test cluster, played by one small HTTP server on 127.0.0.1.

The simulated cluster (`cluster.ProcessCluster`) and the real one (`realcluster.RealCluster`)
each run one, and the inventory each writes points every node's commands at it with curl,
exactly as an operator's would point at `ssh host systemctl restart kafka`:

- `POST /restart/<id>`: the cluster restarts the node (its own way: the simulated broker is
  killed and started again, the real node stopped cleanly and started), 204;
- `GET /health/<id>`: 200 while the node's process runs, 503 when it does not
  (`systemctl is-active kafka`);
- `POST /install/<id>/<version>`: only where the cluster can install a version (the real one):
  204 when the node's next start runs that version, 404 when there is no such version;
- anything else, or a node the cluster does not have: 404.

The server only routes: what a restart, a health check or an install does, and what the test
records of it, is the cluster's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ControlServer:
    """Serves `restart`, `health` and (when given) `install` for the node ids `known` accepts,
    on an ephemeral port of 127.0.0.1, from a daemon thread, until `close()`."""

    def __init__(
        self,
        *,
        known: Callable[[int], bool],
        restart: Callable[[int], None],
        health: Callable[[int], bool],
        install: Callable[[int, str], bool] | None = None,
    ) -> None:
        self._known = known
        self._restart = restart
        self._health = health
        self._install = install
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def commands(self, node_id: int) -> dict[str, str]:
        """The inventory's commands of `node_id`: `restart` and `health`, and `install` (run by
        a roll with --kafka-version only) where the cluster installs versions."""
        commands = {
            "restart": f"curl -sf -X POST {self.url}/restart/{node_id}",
            "health": f"curl -sf {self.url}/health/{node_id}",
        }
        if self._install is not None:
            commands["install"] = (
                f'curl -sf -X POST {self.url}/install/{node_id}/"$ROLLGUARD_KAFKA_VERSION"'
            )
        return commands

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        control = self

        class Handler(BaseHTTPRequestHandler):
            def _node(self, verb: str, extra: int = 0) -> int | None:
                parts = self.path.strip("/").split("/")
                if len(parts) == 2 + extra and parts[0] == verb and parts[1].isdigit():
                    node_id = int(parts[1])
                    return node_id if control._known(node_id) else None
                return None

            def do_POST(self) -> None:
                install = control._install
                if install is not None and (node_id := self._node("install", extra=1)) is not None:
                    version = self.path.strip("/").split("/")[2]
                    self.send_response(204 if install(node_id, version) else 404)
                elif (node_id := self._node("restart")) is not None:
                    control._restart(node_id)
                    self.send_response(204)
                else:
                    self.send_response(404)
                self.end_headers()

            def do_GET(self) -> None:
                node_id = self._node("health")
                if node_id is None:
                    self.send_response(404)
                else:
                    self.send_response(200 if control._health(node_id) else 503)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler
