"""Rate-limit headers parsed into a frozen snapshot, for cooldowns and usage display.

Two header families are understood (names case-insensitive; the adapter records them as
``(name, value)`` pairs):

* OpenAI and compatible servers: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``,
  plus the hourly ``...-requests-1h`` / ``...-tokens-1h`` variants some providers add;
* Anthropic: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}``.

Reset values may be Go-style durations (``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"``), plain
seconds (``"2.5"``), epoch timestamps (a number above 10**9, seconds or milliseconds), or
RFC 3339 timestamps (``"2025-01-01T00:00:30Z"``). Timestamps become seconds relative to the
``now`` the caller passes (a recorded clock reading); without ``now`` they are dropped.
Anything unparseable is ignored: the parser never raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime

import attrs

BUCKETS: tuple[str, ...] = (
    "requests", "tokens", "input_tokens", "output_tokens", "requests_1h", "tokens_1h",
)
_LABELS = {"input_tokens": "input tokens", "output_tokens": "output tokens",
           "requests_1h": "requests/h", "tokens_1h": "tokens/h"}
_FIELDS = ("limit", "remaining", "reset")
_OPENAI = re.compile(r"x-ratelimit-(limit|remaining|reset)-(requests|tokens)(-1h)?")
_ANTHROPIC = re.compile(
    r"anthropic-ratelimit-(requests|tokens|input-tokens|output-tokens)-(limit|remaining|reset)")
_DURATION = re.compile(r"(?:\d+(?:\.\d*)?(?:ns|us|µs|ms|h|m|s))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|ms|h|m|s)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_EPOCH_FLOOR = 1e9
_MAX_VALUE_CHARS = 64


@attrs.frozen(kw_only=True)
class Bucket:
    """One limit: how much is allowed, how much is left, seconds until it refills."""

    limit: int | None = None
    remaining: int | None = None
    reset_seconds: float | None = None

    @property
    def used(self) -> int | None:
        if self.limit is None or self.remaining is None:
            return None
        return max(self.limit - self.remaining, 0)

    @property
    def usage(self) -> float | None:
        """Fraction of the limit used, in ``[0, 1]``; None when unknown."""
        if self.used is None or not self.limit or self.limit <= 0:
            return None
        return min(self.used / self.limit, 1.0)

    @property
    def exhausted(self) -> bool:
        return self.remaining is not None and self.remaining <= 0


@attrs.frozen(kw_only=True)
class RateLimitSnapshot:
    """The buckets one response reported, in :data:`BUCKETS` order, as ``(name, Bucket)``."""

    buckets: tuple[tuple[str, Bucket], ...] = ()
    captured_at: float | None = None

    def bucket(self, name: str) -> Bucket | None:
        return next((b for n, b in self.buckets if n == name), None)


def parse_rate_limits(headers: Iterable[tuple[str, str]], *,
                      now: float | None = None) -> RateLimitSnapshot:
    """Parse response headers into a snapshot; unknown headers and bad values are skipped."""
    found: dict[str, dict[str, object]] = {}
    for pair in headers:
        key = _header_key(pair)
        if key is None:
            continue
        bucket, field = key
        value = _value(field, str(pair[1]), now)
        if value is not None:
            found.setdefault(bucket, {})[field] = value
    buckets = tuple((name, Bucket(limit=found[name].get("limit"),  # type: ignore[arg-type]
                                  remaining=found[name].get("remaining"),  # type: ignore[arg-type]
                                  reset_seconds=found[name].get("reset")))  # type: ignore[arg-type]
                    for name in BUCKETS if name in found)
    return RateLimitSnapshot(buckets=buckets, captured_at=now)


def parse_reset(value: str, *, now: float | None = None) -> float | None:
    """Seconds until a reset: a duration, plain seconds, an epoch or RFC 3339 timestamp."""
    if now is not None and not math.isfinite(now):
        now = None
    text = value.strip()
    if not text or len(text) > _MAX_VALUE_CHARS:
        return None
    if _DURATION.fullmatch(text):
        return sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(text))
    number = _number(text)
    if number is not None:
        if number < _EPOCH_FLOOR:
            return max(number, 0.0)
        if now is None:
            return None
        epoch = number / 1000.0 if number >= _EPOCH_FLOOR * 1000 else number
        return max(epoch - now, 0.0)
    return _from_timestamp(text, now)


def seconds_until_reset(snapshot: RateLimitSnapshot, *, now: float | None = None) -> float | None:
    """How long until every exhausted bucket has refilled; None when none is exhausted or no
    exhausted bucket says when. With ``now``, the time since the snapshot is subtracted."""
    resets = [b.reset_seconds for _, b in snapshot.buckets
              if b.exhausted and b.reset_seconds is not None]
    if not resets:
        return None
    elapsed = 0.0
    if now is not None and snapshot.captured_at is not None:
        elapsed = now - snapshot.captured_at
        elapsed = elapsed if math.isfinite(elapsed) and elapsed > 0 else 0.0
    return max(max(resets) - elapsed, 0.0)


def is_exhausted(snapshot: RateLimitSnapshot, *, reserve: int = 0) -> bool:
    """Whether some bucket has at most ``reserve`` left: the key should rest before a 429."""
    return any(b.remaining is not None and b.remaining <= reserve for _, b in snapshot.buckets)


def format_usage(snapshot: RateLimitSnapshot) -> str:
    """``"requests 12/60, tokens 9k/40k, resets in 6s"``: used/limit per bucket, then the
    reset of the most used bucket."""
    parts = [f"{_LABELS.get(name, name)} {format_count(b.used)}/{format_count(b.limit)}"
             for name, b in snapshot.buckets if b.limit is not None]
    if not parts:
        return "no rate-limit data"
    binding = max((b for _, b in snapshot.buckets if b.reset_seconds is not None),
                  key=lambda b: (b.usage or 0.0, b.reset_seconds), default=None)
    if binding is not None:
        parts.append(f"resets in {format_seconds(binding.reset_seconds or 0.0)}")
    return ", ".join(parts)


def format_count(count: int | None) -> str:
    """``150``, ``9k``, ``12.5k``, ``1.5M``; ``?`` when unknown."""
    if count is None:
        return "?"
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if abs(count) >= size:
            return f"{count / size:.1f}".removesuffix(".0") + suffix
    return str(count)


def format_seconds(seconds: float) -> str:
    """``20ms``, ``6s``, ``6m0s``, ``1h2m``."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60}s"
    return f"{whole // 3600}h{whole % 3600 // 60}m"


# --- helpers ----------------------------------------------------------------------------------

def _header_key(pair: object) -> tuple[str, str] | None:
    """``(bucket, field)`` for a rate-limit header pair, else None."""
    if not isinstance(pair, tuple | list) or len(pair) != 2 or not isinstance(pair[0], str):
        return None
    name = pair[0].strip().lower()
    if match := _OPENAI.fullmatch(name):
        field, bucket, hourly = match.groups()
        return bucket + ("_1h" if hourly else ""), field
    if match := _ANTHROPIC.fullmatch(name):
        bucket, field = match.groups()
        return bucket.replace("-", "_"), field
    return None


def _value(field: str, raw: str, now: float | None) -> int | float | None:
    if field == "reset":
        return parse_reset(raw, now=now)
    number = _number(raw.strip())
    return None if number is None else int(number)


def _number(text: str) -> float | None:
    if len(text) > _MAX_VALUE_CHARS:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _from_timestamp(text: str, now: float | None) -> float | None:
    if now is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return max(moment.timestamp() - now, 0.0)
    except (ValueError, OverflowError, OSError):
        return None
