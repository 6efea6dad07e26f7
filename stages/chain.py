"""The order of the stages that run before every model call (DESIGN: the flow of one turn).
Cache marks are not a separate step: the request stage asks ``cache_marks_for``."""

from __future__ import annotations

from collections.abc import Callable

from stages.budget import decide_budget
from stages.compression import decide_compression
from stages.credentials import decide_credentials
from stages.decision import Decision
from stages.preflight import decide_preflight
from stages.routing import decide_routing

PRE_CALL_STAGES: tuple[tuple[str, Callable[..., Decision]], ...] = (
    ("budget", decide_budget),
    ("preflight", decide_preflight),
    ("compression", decide_compression),
    ("routing", decide_routing),
    ("credentials", decide_credentials),
)
