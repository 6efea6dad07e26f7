"""Secret redaction, applied to everything that enters the event log or a log line.

Known secrets (the keys mibyan was configured with) are replaced wherever they appear; common
credential shapes are masked too: vendor key prefixes (OpenAI, Anthropic, GitHub, GitLab,
Slack, Google, AWS, Stripe, SendGrid, Twilio, Hugging Face, ...), Slack and Discord webhooks,
Telegram bot tokens, ``Authorization`` headers of any scheme and API-key headers,
``KEY=value`` and ``password: value`` assignments, JSON secret fields, PEM and PGP private keys
(even cut off), passwords in URLs and connection strings, Azure connection strings, and JWTs.

Redaction is idempotent: a masked value is never masked again. :func:`holds_mask` finds what it
left behind (for an export's provenance), told from ordinary text with dots and stars.

``patterns`` holds the shapes looked for, ``masks`` what is written in their place, ``text``
the pass over one text and ``event_fields`` the walk over an event's redacted fields.
"""

from stages.log.redact.event_fields import redact_event
from stages.log.redact.masks import holds_mask, mask, scrub_surrogates
from stages.log.redact.text import redact

__all__ = ["holds_mask", "mask", "redact", "redact_event", "scrub_surrogates"]
