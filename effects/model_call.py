"""One model call, interruptible. A client whose calls stop at once when their token is
cancelled from another thread (``stops_on_cancel``: the shipped HTTP adapters, which shut the
socket down) is called on the caller's own thread, and the agent's ``Interrupt`` cancels it;
any other client's call runs on a worker thread while the caller's thread waits for it or for
an interrupt, and is left behind when one comes. Handing a call to a worker and back costs two
thread wake-ups: little CPU, but about a sixth of a short turn's wall time against a local
server (bench/README.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from effects.logs import get_logger
from effects.protocols import CancelToken, Clock, DeltaSink, Interrupt, ModelClient
from effects.workers import STOPPED, run_until
from stages.decision import ModelRequest
from stages.errors import MibyanError, ModelBehaviourError, ProviderError
from stages.log.events import Event, Interrupted, ModelFailed, ModelReplied

INTERRUPT_POLL_SECONDS = 0.02

log = get_logger(__name__)


def _tokenised(reply: ModelReplied, request: ModelRequest) -> ModelReplied:
    """The reply with the named tokenizer's record (on this worker thread, so that an
    interrupt does not wait for the template); any client's reply, the router's or a caller's.
    A tokenizer that cannot be loaded (the shell checks it before a session starts) leaves
    the reply as it came: the tokens are a record, never a reason to fail a turn."""
    if not (request.logprobs and request.tokenizer):
        return reply
    from effects.providers.named_tokenizer import load_tokenizer, with_named_tokens
    try:
        tokenizer = load_tokenizer(request.tokenizer)
    except MibyanError as exc:
        log.warning("tokens.tokenizer_unavailable", error=str(exc)[:300])
        return reply
    return with_named_tokens(reply, request, tokenizer)


def failure(exc: ProviderError | ModelBehaviourError, elapsed: float) -> ModelFailed:
    """A provider failure as plain facts the classifier can read (and replay can serve)."""
    body = getattr(exc, "body", None)
    return ModelFailed(error_type=type(exc).__name__, message=str(exc),
                       status=getattr(exc, "status", None), latency_ms=round(elapsed * 1000, 3),
                       code=getattr(exc, "code", None), body=body[:2000] if body else None,
                       retry_after=getattr(exc, "retry_after", None),
                       rate_limits=getattr(exc, "rate_limits", ()),
                       partial=getattr(exc, "partial", False))


def call_model(model: ModelClient | None, request: ModelRequest, *, clock: Clock,
               interrupt: threading.Event, on_delta: DeltaSink | None = None,
               on_reasoning: DeltaSink | None = None) -> Event:
    """The reply, the failure, or ``Interrupted`` (the reply is then discarded)."""
    if model is None:
        raise MibyanError("this session has no model client")
    cancel = CancelToken()
    started = clock.monotonic()

    def deliver(delta: str) -> None:
        if on_delta is not None and not cancel.cancelled:
            on_delta(delta)

    # Without a sink nothing reaches the user, so a dropped stream stays retryable.
    sink = deliver if on_delta is not None else None
    # Only a caller that listens for reasoning asks for it: other clients keep working.
    extra = {} if on_reasoning is None else {"on_reasoning": _guarded(on_reasoning, cancel)}

    def work() -> Event:
        try:
            reply = model.complete(request, on_delta=sink, cancel=cancel, **extra)
            return _tokenised(reply, request)
        except (ProviderError, ModelBehaviourError) as exc:
            return failure(exc, clock.monotonic() - started)
        except AssertionError:  # a broken invariant or a strict test double: loud
            raise
        except Exception as exc:
            log.error("model_client_failed", error=f"{type(exc).__name__}: {exc}",
                      exc_info=True)
            unusable = ModelBehaviourError(
                f"the model client failed on this call: {type(exc).__name__}: {exc}")
            return failure(unusable, clock.monotonic() - started)

    if isinstance(interrupt, Interrupt) and _stops_on_cancel(model, request):
        return _here(work, cancel, interrupt)
    # A reused worker thread: starting one per call cost about 0.17 ms.
    result = run_until(work, interrupt.is_set, poll=INTERRUPT_POLL_SECONDS,
                       name="mibyan-model-call")
    if result is STOPPED:
        cancel.cancel()
        interrupt.clear()
        return Interrupted(during="model_call")
    return result


def _stops_on_cancel(model: ModelClient, request: ModelRequest) -> bool:
    """Whether this call may run on the caller's thread. Not when it asks for tokens: a
    server's ``/tokenize`` is asked after the call, and a named tokenizer's template is
    applied, on the worker, so that an interrupt does not wait for either."""
    stops = getattr(model, "stops_on_cancel", None)
    return stops is not None and not request.logprobs and bool(stops(request))


def _here(work: Callable[[], Event], cancel: CancelToken, interrupt: Interrupt) -> Event:
    """``work`` on this thread, cancelled by the interrupt; an interrupted call's failure is
    ``Interrupted``, and a reply that was whole before the interrupt came is kept (the next
    poll between steps sees the interrupt), as the worker's caller would have it."""
    interrupt.call = cancel
    try:
        if interrupt.is_set():  # it came before the call could be cancelled by it
            cancel.cancel()
        result = work()
    finally:
        interrupt.call = None
    if cancel.cancelled and not isinstance(result, ModelReplied):
        interrupt.clear()
        return Interrupted(during="model_call")
    return result


def _guarded(sink: DeltaSink, cancel: CancelToken) -> DeltaSink:
    """``sink``, silent once the call was cancelled (the reply is discarded)."""
    def deliver(delta: str) -> None:
        if not cancel.cancelled:
            sink(delta)
    return deliver
