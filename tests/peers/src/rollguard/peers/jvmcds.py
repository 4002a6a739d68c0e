"""Class data sharing for the test Kafka JVMs: a Kafka node loads its thousands of classes
from an archive mapped into memory instead of parsing and verifying each jar entry again.

Measured here (one KRaft node, C1 only): 3.7-4.1 s of CPU to "started" without an archive,
2.2-2.4 s with one; the suite starts dozens of these JVMs on two cores.

The archive is the JDK's dynamic one (`-XX:ArchiveClassesAtExit`, JDK 13+): the first JVM of a
test process that finds none writes it when it exits (about a second, once per classpath),
every later JVM maps it (`-XX:SharedArchiveFile`). (Connect workers load their plugins through
classloaders of their own, which the dynamic archive does not cover: not used there.)

An archive is only valid for the classpath and the jars it was made from, so its name carries a
digest of the JVM, the classpath and each jar's size and mtime: a fresh clone's jars get an
archive of their own, and a JVM never maps an archive that does not fit (it would run without
sharing and say so). Archives live outside the clone, in ~/.cache/rollguard/cds, as Maven keeps
its jars; each is written to a name of its own and renamed into place, so concurrent test
workers never see half of one.
"""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import threading
from pathlib import Path

CACHE = Path(os.environ.get("ROLLGUARD_CDS_CACHE", Path.home() / ".cache" / "rollguard" / "cds"))
KEEP = 4  # archives kept (about 50 MB each; each clone makes its own): older ones go

_dumping: set[str] = set()  # archives this process is writing (one JVM each)
_lock = threading.Lock()


@functools.cache
def _java_version(java: str) -> str:
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    return done.stderr


def archive_for(java: str, lib: Path) -> Path:
    """Where the archive of `java` running with `-cp lib/*` is (or would be) kept."""
    digest = hashlib.sha256(_java_version(java).encode())
    digest.update(str(lib.resolve()).encode())
    for jar in sorted(lib.glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return CACHE / f"jvm-{digest.hexdigest()[:16]}.jsa"


def mapping(java: str, lib: Path) -> list[str]:
    """The flag that maps the archive of `-cp lib/*` if there is one (none otherwise): for a JVM
    that must not write one (a tool's archive would lack most of a node's classes)."""
    archive = archive_for(java, lib)
    return [f"-XX:SharedArchiveFile={archive}"] if archive.exists() else []


def flags(java: str, lib: Path) -> tuple[list[str], Path | None]:
    """The JVM flags for `-cp lib/*`, and the file this JVM writes its archive to at exit (to
    be `publish`ed then), or None when it maps an existing one (or another JVM is writing it)."""
    if mapped := mapping(java, lib):
        return mapped, None
    archive = archive_for(java, lib)
    with _lock:
        if str(archive) in _dumping:
            return [], None
        _dumping.add(str(archive))
    CACHE.mkdir(parents=True, exist_ok=True)
    pending = archive.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
    return [f"-XX:ArchiveClassesAtExit={pending}"], pending


def publish(pending: Path | None) -> None:
    """After the JVM that wrote `pending` has exited: rename it into place (a JVM killed before
    it could write one leaves nothing, and the next JVM tries again)."""
    if pending is None:
        return
    archive = pending.with_name(pending.name.split(".", 1)[0] + ".jsa")
    with _lock:
        _dumping.discard(str(archive))
    if not pending.exists():
        return
    os.replace(pending, archive)
    kept = sorted(CACHE.glob("*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[KEEP:]:
        old.unlink(missing_ok=True)
    for stale in CACHE.glob("*.part"):
        # a .part of a JVM that died mid-write, left by a process that is gone
        pid = stale.name.split(".")[-3]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            stale.unlink(missing_ok=True)
