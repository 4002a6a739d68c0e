"""The root of rollguard's exceptions.

Exceptions are classified by what the caller does next, not by where they came from:

    RollguardError
     +-- ConfigError        bad settings or files: tell the user, exit 2, nothing started
     |    +-- TlsFileError  a certificate, key or CA file that cannot be used
     +-- WireFormatError    a peer sent something that is not the agreed wire format

Library errors (ssl, OSError, json) are translated at the boundary that meets them,
with the original chained as the cause.
"""

from __future__ import annotations


class RollguardError(Exception):
    """Base class of every error rollguard raises on purpose."""


class ConfigError(RollguardError):
    """A setting or a file named by a setting cannot be used; the message names it."""


class TlsFileError(ConfigError):
    """A certificate, private key or CA bundle cannot be used for TLS."""


class WireFormatError(RollguardError):
    """A document received from a peer does not follow the wire contract."""
