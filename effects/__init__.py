"""mibyan's effects: the only code that touches the network, disk, clock, randomness, threads."""

from effects.eventlog.store import SessionLog, read_envelopes, verify
from effects.protocols import Clock, IdSource, ModelClient
from effects.tools.executor import ScriptedToolRunner, ThreadPoolToolRunner, ToolRunner

__all__ = [
    "Clock",
    "IdSource",
    "ModelClient",
    "ScriptedToolRunner",
    "SessionLog",
    "ThreadPoolToolRunner",
    "ToolRunner",
    "read_envelopes",
    "verify",
]
