"""structlog loggers routed through the standard ``logging`` module, redacted.

mibyan never configures logging globally: each logger wraps ``logging.getLogger(name)``, so a
host application's handlers and levels decide what is shown. Every line is redacted first.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from stages.log.redact import redact


def _redact_fields(logger: Any, method: str,
                   event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    """Every string of the event redacted as it is, before the renderer escapes it: a line
    break rendered as ``\\n`` hides the start of the header on the next line from the patterns
    (``\\nAuthorization: Basic ...`` is no word boundary)."""
    del logger, method
    return {key: _redacted(value) for key, value in event.items()}


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_redacted(v) for v in value)
    return value


def _redact_line(logger: Any, method: str, line: Any) -> Any:
    """The rendered line once more: a value that is no string renders its own text."""
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


class RedactingFilter(logging.Filter):
    """Redacts the lines of a logger mibyan does not write itself (a server library's), their
    tracebacks included, with ``known`` secrets (the gateway's tokens) as well as the shapes
    of common keys."""

    def __init__(self, known: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.known = known

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message, self.known)
        if clean != message:
            record.msg, record.args = self._hidden(record, clean)
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.known)
        return True

    def _hidden(self, record: logging.LogRecord, clean: str) -> tuple[Any, Any]:
        """The record's template and arguments with the secrets hidden. The arguments keep
        their shape when hiding them one by one leaves nothing to hide, since a formatter may
        unpack them (uvicorn's access lines); else the whole line, redacted, with none."""
        if isinstance(record.msg, str) and isinstance(record.args, tuple):
            args = tuple(redact(a, self.known) if isinstance(a, str) else a for a in record.args)
            try:
                line = record.msg % args
            except (TypeError, ValueError):
                return clean, None
            if redact(line, self.known) == line:
                return record.msg, args
        return clean, None


def redact_loggers(names: tuple[str, ...], known: tuple[str, ...] = ()) -> None:
    """Every line of the loggers ``names`` redacted from now on, ``known`` secrets too (a
    logger redacted already learns them: one filter per logger)."""
    for name in names:
        logger = logging.getLogger(name)
        present = next((f for f in logger.filters if isinstance(f, RedactingFilter)), None)
        if present is None:
            logger.addFilter(RedactingFilter(known))
        else:
            present.known = tuple(dict.fromkeys((*present.known, *known)))


LOG_FORMAT_ENV = "MIBYAN_LOG_FORMAT"
"""``json`` makes every line a JSON object (with ``timestamp`` and ``level``) for a log
pipeline; anything else keeps the ``key=value`` lines."""


def _structlog_logger(name: str) -> Any:
    import structlog

    renderer: list[Any] = [
        structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True)]
    if os.environ.get(LOG_FORMAT_ENV, "").lower() == "json":
        renderer = [structlog.stdlib.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.JSONRenderer(sort_keys=True)]
    return structlog.wrap_logger(
        logging.getLogger(name),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[structlog.stdlib.filter_by_level, _redact_fields, *renderer, _redact_line],
        cache_logger_on_first_use=True,
    )
