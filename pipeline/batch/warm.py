"""Preloaded by the batch's fork server: what every process pays once, paid before the workers
fork from it, so that each worker's first session costs what its later ones do. Importing this
module does the work (that is what a fork server preload is for): the provider adapters and
their HTTP shell (httpx2 and httpcore2 imported, a pool built: about 0.3 s on first use), and
the event codec's generated (un)structuring functions for every event kind. The official SDKs
are not loaded: the adapters never use them."""

from __future__ import annotations


def warm() -> None:
    import effects.providers.anthropic_messages
    import effects.providers.openai_chat
    import effects.providers.openai_responses  # noqa: F401
    import pipeline.agent
    import pipeline.batch.generate  # noqa: F401
    from effects.eventlog import codec
    from effects.providers import http_shell
    codec.warm()
    http_shell.preload()


warm()
