"""Typed errors. Every error zabray raises on purpose is a ``ZabError``.

The split follows who is to blame: a caller misusing the API or giving a bad config
(``ConfigError``), a peer or a file sending bytes that are not what they claim
(``CodecError``, ``CorruptionError``), or the ensemble being unable to do what was asked
right now (``NoQuorumError``, ``NotRunningError``, ``TimeoutError_``).
"""

from __future__ import annotations


class ZabError(Exception):
    """Base class of every error zabray raises deliberately."""


class ConfigError(ZabError, ValueError):
    """A configuration value or API argument is invalid; the message names the key and what to fix."""


class CodecError(ZabError):
    """Bytes on the wire do not decode to a valid message of a known version.

    The receiver drops the connection that carried them and carries on.
    """


class ProtocolError(ZabError):
    """A peer sent a well-formed message that breaks the protocol (wrong phase, bad epoch).

    The receiver ends its current iteration; it never applies such a message.
    """


class StorageError(ZabError):
    """Durable storage failed (an fsync error, a full disk). The replica must stop."""


class CorruptionError(StorageError):
    """Stored data fails its checksum or is out of order. The replica refuses to serve."""


class FormatVersionError(CorruptionError):
    """Stored data was written in a storage format this zabray does not read. Not damage:
    nothing is quarantined or repaired; the replica refuses to start."""


class NotRunningError(ZabError):
    """The ensemble, replica or session addressed is not running."""


class NoQuorumError(ZabError):
    """No quorum is reachable, so nothing can commit within the timeout."""


class RequestTimeoutError(ZabError, TimeoutError):
    """A call did not complete within its timeout; the message says what was awaited."""


class UncertainOutcomeError(ZabError):
    """A write was sent but its fate is unknown (its replica lost the leader before the commit).

    It may or may not be committed; ZooKeeper calls this a connection loss.
    """


class AuthenticationError(ZabError):
    """The other end of a connection did not prove it holds the ensemble secret (a wrong
    ``secret_file``, or something that is not a member listening at a member's address)."""


class ScenarioError(ZabError):
    """A scenario step failed: a wait timed out, an expectation did not hold, or a fault or
    write it asked for failed. The message names the step."""


class NotMemberError(ZabError):
    """A replica is not a member of the ensemble's configuration: it was removed by a
    reconfiguration (it left), or it was started outside it without being added."""


class ReconfigError(ZabError):
    """The ensemble refused a reconfiguration; ``code`` is ZooKeeper's error name for why:
    RECONFIG_DISABLED, RECONFIG_IN_PROGRESS, BAD_VERSION, BAD_ARGUMENTS, NEW_CONFIG_NO_QUORUM
    (or NO_AUTH from a service that checks who asks). Nothing changed."""

    CODES = ("RECONFIG_DISABLED", "RECONFIG_IN_PROGRESS", "BAD_VERSION", "BAD_ARGUMENTS",
             "NEW_CONFIG_NO_QUORUM", "NO_AUTH")

    def __init__(self, code: str, message: str | None = None) -> None:
        if message is None:  # "CODE: message", as str() gives it (and unpickling passes it)
            code, _, message = code.partition(": ")
        if code not in self.CODES:
            raise ValueError(f"not a reconfig error code: {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    @staticmethod
    def from_reason(reason: str) -> ReconfigError:
        """The error a ``str(ReconfigError)`` came from (a refusal carried as text)."""
        code, _, message = reason.partition(": ")
        return ReconfigError(code, message) if code in ReconfigError.CODES else ReconfigError("BAD_ARGUMENTS", reason)
