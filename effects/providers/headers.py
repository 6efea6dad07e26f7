"""What mibyan keeps of a provider's response headers."""

from __future__ import annotations

from typing import Any

RATE_LIMIT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def rate_limit_headers(headers: Any) -> tuple[tuple[str, str], ...]:
    """The rate-limit headers (OpenAI's ``x-ratelimit-*``, Anthropic's
    ``anthropic-ratelimit-*``), lower-cased, in the order sent."""
    return tuple((k.lower(), v) for k, v in headers.multi_items()
                 if k.lower().startswith(RATE_LIMIT_PREFIXES))
