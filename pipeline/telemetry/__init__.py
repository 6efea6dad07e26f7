"""OpenTelemetry spans of sessions in the GenAI semantic conventions: live (``live``) and
from a past session's log (``otlp``, ``mibyan traces``)."""

from pipeline.telemetry.live import flush, instrument, uninstrument

__all__ = ["flush", "instrument", "uninstrument"]
