"""Preloaded by the batch's fork server: what every process pays once, paid before the workers
fork from it, so that each worker's first session costs what its later ones do. Importing this
module does the work (that is what a fork server preload is for): the SDK's chat modules and
its client (pydantic models are built when their classes are), and the event codec's
generated (un)structuring functions for every event kind."""

from __future__ import annotations


def warm() -> None:
    import openai
    import openai.resources.chat.completions
    import openai.types.chat

    import pipeline.agent
    import pipeline.batch.generate  # noqa: F401
    from effects.eventlog import codec
    codec.warm()
    # No request is made: building the client and its resources is the one-off part.
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")
    client.chat.completions  # noqa: B018
    client.close()


warm()
