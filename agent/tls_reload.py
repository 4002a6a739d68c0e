"""Serving TLS from files that may be replaced while the agent runs (rotated Kubernetes secrets).

The listening socket keeps one `ssl.SSLContext`; its `sni_callback` runs during every handshake
(with or without SNI) and moves the connection onto the newest context. A watcher polls the files
and builds a new context when their contents change. A new context that fails to build (a half
written secret, a key that does not match yet) is logged and counted, and the previous one keeps
serving: connections are never refused because of a rotation in progress.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

from shared.errors import TlsFileError
from shared.tls import server_context

logger = logging.getLogger(__name__)


class ReloadingServerContext:
    def __init__(
        self,
        cert: Path,
        key: Path,
        ca: Path,
        *,
        on_reload: Callable[[bool], None] = lambda ok: None,
    ) -> None:
        self._files = (cert, key, ca)
        self._on_reload = on_reload
        self._digest = self._fingerprint()
        self._current = self._build()  # raises TlsFileError: the agent does not start
        self.listening = self._current

    def _build(self) -> ssl.SSLContext:
        context = server_context(*self._files)
        context.sni_callback = self._select
        return context

    def _fingerprint(self) -> bytes:
        digest = hashlib.sha256()
        for path in self._files:
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"\0unreadable")
            digest.update(b"\0")
        return digest.digest()

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        current = self._current
        if connection.context is not current:
            connection.context = current

    @property
    def current(self) -> ssl.SSLContext:
        return self._current

    def reload_if_changed(self) -> bool | None:
        """Rebuild if the files changed: True reloaded, False failed (old kept), None unchanged."""
        digest = self._fingerprint()
        if digest == self._digest:
            return None
        self._digest = digest
        try:
            self._current = self._build()
        except TlsFileError as exc:
            logger.error(
                "TLS files changed but cannot be used; still serving the old ones: %s", exc
            )
            self._on_reload(False)
            return False
        logger.info("TLS files changed; new connections use the new certificate, key and CA")
        self._on_reload(True)
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            # Reading three small files is cheap, but off the event loop all the same.
            await asyncio.to_thread(self.reload_if_changed)
