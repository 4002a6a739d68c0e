"""An ASGI app served by uvicorn on 127.0.0.1 in a thread of its own, over TLS when given a
context: the HTTP peers (Kafka Connect's REST API, the Kubernetes API) and a test's HTTPS peer
(tests/helpers.py) are each one, started and stopped alike."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from typing import Any

import uvicorn

from rollguard.peers.processes import wait_until
from rollguard.peers.spawn import Stops


class Served(Stops):
    """`app` serving at `url` from its start until `stop` (or its `with`'s end); `config`:
    uvicorn's others."""

    def __init__(
        self, app: Any, name: str, *, tls: ssl.SSLContext | None = None, **config: Any
    ) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP,
        # and without it every keep-alive request waits ~40 ms for a delayed ACK.
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        if tls is not None:
            config["ssl_context_factory"] = lambda config, default: tls
        settings = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                  loop="asyncio", ws="none", interface="asgi3",
                                  timeout_graceful_shutdown=2, **config)  # fmt: skip
        self.server = uvicorn.Server(settings)
        serve = self.server.serve(sockets=[self.sock])
        self.thread = threading.Thread(target=asyncio.run, args=(serve,), name=name, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, timeout=10, interval=0.01, what=f"{name} serving")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()
