"""The closed error tree of mibyan.

Every exception mibyan raises on purpose derives from :class:`MibyanError`. Domain outcomes that
the model should see (an unknown tool, invalid tool arguments, a refused call) are events, not
exceptions; these classes are for what the *caller* must handle.

    MibyanError
    ├── UsageError                 bad configuration or arguments from the caller
    │   ├── ProviderNotConfiguredError
    │   └── SettingError           a setting no stage can follow (also a ``ValueError``)
    ├── ModelBehaviourError        the model returned something unusable
    ├── EffectError                an effect (I/O) failed
    │   ├── ProviderError          a model provider failed (carries status, body, retry-after)
    │   │   ├── ProviderHTTPError
    │   │   ├── ProviderTimeoutError
    │   │   └── ProviderUnavailableError  (connection refused/dropped, stream cut)
    │   └── ToolRunnerError
    ├── BudgetExhaustedError
    ├── LogError
    │   ├── LogConflictError       another writer holds the session, or seq/hash mismatch
    │   ├── LogCorruptError        a complete record does not parse, chain or match its hash,
    │   │                          or the log is empty or does not begin with session_started
    │   └── BlobMissingError       an image the log refers to is not in the home's blob store
    ├── ReplayDivergenceError      replay produced an event that differs from the log
    └── InterruptedTurnError
"""

from __future__ import annotations


class MibyanError(Exception):
    """Root of every error mibyan raises on purpose."""


class UsageError(MibyanError):
    """The caller asked for something impossible (bad config, bad arguments, unknown session)."""


class SettingError(UsageError, ValueError):
    """A setting's value is refused where it is declared (``SessionSettings``' validators): a
    ``UsageError`` for the caller who gave it, a ``ValueError`` for code building the value."""


class ProviderNotConfiguredError(UsageError):
    """No model provider could be resolved; the message names the settings that were consulted."""


class ModelBehaviourError(MibyanError):
    """The model's reply cannot be used (no choices, unparseable body)."""


class EffectError(MibyanError):
    """An effect (network, disk, subprocess) failed."""


class ProviderError(EffectError):
    """A model provider call failed. Attributes are plain data, never SDK objects."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
        rate_limits: tuple[tuple[str, str], ...] = (),
        partial: bool = False,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.code = code  # always text: an integer code from a provider arrives as "500"
        self.retry_after = retry_after
        self.provider = provider
        self.rate_limits = rate_limits
        self.partial = partial
        self.endpoint = endpoint  # the base URL actually used, without credentials or query


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error status."""


class ProviderTimeoutError(ProviderError):
    """The provider did not answer in time."""


class ProviderUnavailableError(ProviderError):
    """The provider could not be reached, or dropped the connection or stream."""


class ToolRunnerError(EffectError):
    """The tool runner itself failed (not a tool raising: that is an event)."""


class BudgetExhaustedError(MibyanError):
    """An iteration or token budget was used up where the caller asked for an exception."""


class LogError(MibyanError):
    """The event log cannot be used as asked."""


class LogConflictError(LogError):
    """Another writer holds the session, or the log's sequence or hash chain disagrees."""


class LogCorruptError(LogError):
    """A complete record fails to parse, to chain or to match its own hash, or the log is empty
    or does not begin with its session start (only a final line without its newline is a torn
    write, which is cut instead)."""


class BlobMissingError(LogError):
    """An image a session refers to (by its SHA-256) is not in the home's blob store, or its
    bytes there no longer match their hash: it cannot be sent, exported or served again."""


class EventEncodingError(LogError):
    """An event does not survive the codec's round trip, so it is not appended (a log that
    cannot be read back would stop every later replay and resume)."""


class ReplayDivergenceError(MibyanError):
    """A replay produced an event that differs from the logged one."""

    def __init__(self, message: str, *, seq: int, stage: str, expected: str, produced: str) -> None:
        super().__init__(message)
        self.seq = seq
        self.stage = stage
        self.expected = expected
        self.produced = produced


class InterruptedTurnError(MibyanError):
    """A turn was interrupted where the caller asked for an exception."""
