"""Secrets that a command line or a signed URL carries without a ``name=value`` or
``name: value`` around them, which neither gitleaks' rules (written for files) nor the named
patterns see:

* a cloud CLI setting a credential: ``aws configure set aws_secret_access_key VALUE``;
* a command's flag naming a secret: ``--password VALUE``, ``--client-secret=VALUE``,
  ``--account-key VALUE``, not ``-p`` (too common);
* a URL's query parameter that signs or authorises it: Azure SAS ``sig=``, S3 and GCS presigned
  ``X-Amz-Signature=``/``X-Amz-Security-Token=``/``X-Goog-Signature=``, ``access_token=``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from stages.log.gated import Gated

_AWS_CONFIGURE = re.compile(
    r"(?i)(\baws\s+configure\s+set\s+(?:[\w.-]+\.)?"
    r"(?:aws_secret_access_key|aws_session_token|aws_security_token)\s+)(['\"]?)([^\s'\"]+)\2")
_FLAG = re.compile(
    r"(?i)((?<![\w-])--(?:[\w-]*-)?(?:password|passwd|secret|token|api-key|apikey|account-key|"
    r"access-key|secret-key|sas-token|client-secret|auth-key|private-key|pat)(?:[ \t]+|=))"
    r"(['\"]?)((?!-)[^\s'\"]{4,})\2")
_QUERY = re.compile(
    r"(?i)([?&;](?:sig|signature|x-amz-signature|x-amz-security-token|x-amz-credential|"
    r"x-goog-signature|x-goog-credential|access_token|refresh_token|id_token|api_key|apikey|"
    r"client_secret|token|code|key)=)([^&#\s'\"\\]{8,})")


# Their RE2 gates (stages.log.gated): flags and query parameters are everywhere in code.
_GATED_FLAG = Gated(_FLAG, r"(?i)--[^\s]*?(?:password|passwd|secret|token|api-key|apikey|"
                    r"account-key|access-key|secret-key|sas-token|client-secret|auth-key|"
                    r"private-key|pat)(?:[ \t]+|=)")
_GATED_QUERY = Gated(_QUERY, r"(?i)[?&;](?:sig|signature|x-amz-signature|x-amz-security-token|"
                     r"x-amz-credential|x-goog-signature|x-goog-credential|access_token|"
                     r"refresh_token|id_token|api_key|apikey|client_secret|token|code|key)=")


# A usage text's metavariable (``--password PASSWORD``, ``<token>``, ``$TOKEN``), or markup.
_METAVARIABLE = re.compile(r"[A-Z_]+\W*|[<$].*|.*`.*")


def hide_in_commands(text: str, hidden: Callable[[str], str]) -> str:
    """``text`` with the values above passed through ``hidden`` (which masks them, and leaves
    a mask or a placeholder as it is)."""

    def hide(value: str) -> str:
        return value if _METAVARIABLE.fullmatch(value) else hidden(value)

    lowered = text.lower()
    if "configure" in lowered and "aws_s" in lowered:
        text = _AWS_CONFIGURE.sub(lambda m: m[1] + m[2] + hide(m[3]) + m[2], text)
    if "--" in text:
        text = _GATED_FLAG.sub(lambda m: m[1] + m[2] + hide(m[3]) + m[2], text)
    if "=" in text and ("?" in text or "&" in text):
        text = _GATED_QUERY.sub(lambda m: m[1] + hide(m[2]), text)
    return text
