"""Serving TLS from files that may be replaced while the agent runs (rotated Kubernetes secrets).

A watcher polls the files (certificate, key, CA bundle and, with `--crl`, the CRLs) and builds a
new `ssl.SSLContext` when their contents change; every handshake starts on the newest one (`TlsGate`
asks for `current`). A context keeps its own TLS 1.2 session cache, and issues no tickets
(`rollguard.shared.tls`), so no session made before a rotation is resumed after it: a client whose
CA was removed, or whose certificate the new CRL revokes, must do a full handshake and is refused. A
new context that fails to build (a half written secret, a key that does not match yet) is logged and
counted, and the previous one keeps serving: connections are never refused because of a rotation in
progress.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

from rollguard.shared.errors import TlsFileError
from rollguard.shared.tls import server_context

logger = logging.getLogger(__name__)


class ReloadingServerContext:
    def __init__(
        self,
        cert: Path,
        key: Path,
        ca: Path,
        crl: Path | None = None,
        *,
        sslobject_class: type[ssl.SSLObject] = ssl.SSLObject,
        on_reload: Callable[[bool], None] = lambda ok: None,
    ) -> None:
        self._files = (cert, key, ca, crl)
        self._sslobject_class = sslobject_class
        self._on_reload = on_reload
        self._digest = self._fingerprint()
        self._current = self._build()  # raises TlsFileError: the agent does not start

    def _build(self) -> ssl.SSLContext:
        cert, key, ca, crl = self._files
        context = server_context(cert, key, ca, crl)
        context.sslobject_class = self._sslobject_class
        return context

    def _fingerprint(self) -> bytes:
        digest = hashlib.sha256()
        for path in self._files:
            if path is None:
                continue
            try:
                digest.update(path.read_bytes())
            except OSError:
                digest.update(b"\0unreadable")
            digest.update(b"\0")
        return digest.digest()

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
        logger.info(
            "TLS files changed; new connections use the new certificate, key, CA%s",
            " and CRL" if self._files[3] is not None else "",
        )
        self._on_reload(True)
        return True

    async def watch(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            # Reading three small files is cheap, but off the event loop all the same.
            await asyncio.to_thread(self.reload_if_changed)
