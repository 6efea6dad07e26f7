"""structlog loggers routed through the standard ``logging`` module, redacted.

mibyan never configures logging globally: each logger wraps ``logging.getLogger(name)``, so a
host application's handlers and levels decide what is shown. Every line is redacted first.
"""

from __future__ import annotations

import logging
from typing import Any

from stages.redact import redact


def _redact_line(logger: Any, method: str, line: Any) -> Any:
    del logger, method
    return redact(line)


class _Logger:
    """Builds its structlog logger on first use: importing structlog costs about a tenth of
    mibyan's start, and most processes log nothing before their first answer."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._logger is None:
            self._logger = _structlog_logger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str) -> Any:
    return _Logger(name)


def _structlog_logger(name: str) -> Any:
    import structlog

    return structlog.wrap_logger(
        logging.getLogger(name),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[structlog.stdlib.filter_by_level,
                    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
                    _redact_line],
        cache_logger_on_first_use=True,
    )
