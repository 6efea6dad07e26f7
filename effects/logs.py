"""structlog loggers routed through the standard ``logging`` module, redacted.

mibyan never configures logging globally: each logger wraps ``logging.getLogger(name)``, so a
host application's handlers and levels decide what is shown. Every line is redacted first.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

from stages.redact import redact


def _redact_line(logger: Any, method: str, line: Any) -> Any:
    del logger, method
    return redact(line)


def get_logger(name: str) -> Any:
    return structlog.wrap_logger(
        logging.getLogger(name),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[structlog.stdlib.filter_by_level,
                    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
                    _redact_line],
        cache_logger_on_first_use=True,
    )
