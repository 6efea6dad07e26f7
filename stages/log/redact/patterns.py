"""The shapes of the credentials redaction looks for, as Python patterns: vendor tokens by
their prefixes, webhooks, Telegram bot tokens, ``Authorization`` and API-key headers,
``NAME=value`` and ``name: value`` assignments, JSON secret fields, passwords in URLs and
private keys; the RE2 gates the patterns run behind; and the hints (lower-case literals) that
say a text may hold one at all."""

from __future__ import annotations

import re

import re2

from stages.log.gated import Gated

_PREFIXES = (
    r"sk-[A-Za-z0-9_\-]{8,}", r"gh[pousr]_[A-Za-z0-9]{16,}", r"github_pat_[A-Za-z0-9_]{20,}",
    r"glpat-[A-Za-z0-9_\-]{20,}", r"gl(?:ptt|dt|rt|cbt|imt|agent|oas|ft)-[A-Za-z0-9_\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{30,}",
    r"ya29\.[0-9A-Za-z_\-]{20,}", r"GOCSPX-[A-Za-z0-9_\-]{20,}",
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}",
    r"hf_[A-Za-z0-9]{20,}", r"gsk_[A-Za-z0-9]{20,}", r"xai-[A-Za-z0-9]{20,}",
    r"r8_[A-Za-z0-9]{20,}", r"npm_[A-Za-z0-9]{20,}", r"pypi-[A-Za-z0-9_\-]{20,}",
    r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", r"whsec_[A-Za-z0-9]{20,}",
    r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    r"pplx-[A-Za-z0-9]{20,}", r"fc-[a-f0-9]{32}", r"bb_live_[A-Za-z0-9_\-]{16,}",
    r"gAAAA[A-Za-z0-9_\-=]{40,}", r"dop_v1_[a-f0-9]{64}", r"doo_v1_[a-f0-9]{64}",
    r"tvly-[A-Za-z0-9_\-]{20,}", r"syt_[A-Za-z0-9_\-]{20,}", r"hsk-[A-Za-z0-9_\-]{20,}",
    r"brv_[A-Za-z0-9_\-]{20,}", r"ntn_[A-Za-z0-9]{30,}", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
    r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{20,}", r"key-[a-f0-9]{32}", r"[a-f0-9]{32}-us[0-9]{1,2}",
    r"dapi[a-f0-9]{32}", r"figd_[A-Za-z0-9_\-]{30,}", r"lin_api_[A-Za-z0-9]{30,}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]+)?",
)
# Where a token may start: not inside a word, or right after a JSON escape of a space or a
# line break (``\n``; tool-call arguments are JSON text), whose letter is no word of the text.
_AFTER_ESCAPE = r"(?<=\\[nrtbf])"
_TOKEN_START = r"(?:(?<![A-Za-z0-9_\-])|" + _AFTER_ESCAPE + ")"
# A token ends where the word does: ``hf_servingcell..._h_prio`` is a name in code.
_TOKEN = re.compile(_TOKEN_START + "(?:" + "|".join(_PREFIXES) + r")(?![A-Za-z0-9_\-])")
# A vendor's prefix followed by capitalised words is a name in code
# (``hf_requiredCharacteristicTypes``); a random token's capitals are not followed by words.
CODE_NAME = re.compile(r"[A-Za-z0-9]+[_\-.](?:[a-z]{2,})?(?:[A-Z][a-z]{2,}){2,}")
_TWILIO = re.compile(_TOKEN_START + r"SK[0-9a-f]{32}")
WEBHOOK = re.compile(
    r"(https://(?:hooks\.slack\.com/(?:services|workflows|triggers)|"
    r"(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks|[\w.-]+\.webhook\.office\.com/"
    r"webhookb2)/)([A-Za-z0-9_/@\-]{8,})")
_TELEGRAM = re.compile(r"(?:\b|" + _AFTER_ESCAPE + r")(?:bot)?(\d{8,10}:[A-Za-z0-9_\-]{30,})")
# Headers hold their value on their own line: the gaps are spaces and tabs, never a newline.
_BEARER = re.compile(r"(?i)(authorization[ \t]*[:=][ \t]*bearer[ \t]+|bearer[ \t]+)"
                     r"([A-Za-z0-9._~+/\-]{8,}=*)(?![\w:=])")
_AUTH = re.compile(r"(?i)(\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
                   r"(?:basic|token|digest|bot|apikey|sso-key|key)?[ \t]*)"
                   r"(?!bearer\b)([A-Za-z0-9._~+/\-:=]{6,})")
_KEY_HEADER = re.compile(r"(?i)(\b(?:x-api-key|api-key|x-auth-token|private-token|"
                         r"x-goog-api-key|ocp-apim-subscription-key|x-functions-key)"
                         r"[\"']?[ \t]*:[ \t]*[\"']?)([A-Za-z0-9._~+/\-=]{8,})")
_SECRET_NAME = (r"(?:API_?KEY|APIKEY|ACCESS_?KEY|ACCOUNT_?KEY|SHARED_?ACCESS_?KEY|PRIVATE_?KEY|"
                r"SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|PWD|CREDENTIAL|AUTH|"
                # a personal access token (AZURE_DEVOPS_EXT_PAT), not a PATH
                r"_PAT\b)")
# An ``&`` ends the value where a URL query's or a form's next parameter follows (``&next=``,
# HTML's ``&amp;``); elsewhere it is the value's own (``password=Tr0ub4dor&3`` in prose or a
# shell command), and stopping there would leave the password's tail readable.
_VALUE_AMPERSAND = r"&(?![\w.%\[\]\-]+=|amp;)"
# A quoted value ends at its quote only: the marks that end an unquoted one (``,``, ``;``,
# ``}``) are the password's own there; or where its line does, when the text lost the quote
# (an output cut off). The patterns are run on one line at a time (text._names_in_lines). A
# backslash ends it still: in JSON text an escape is the JSON string's, redacted unescaped.
def _quoted_value(group: int) -> str:
    return rf"(?:(?!\{group})[^\s\\])"


def _quote_closed(group: int) -> str:
    return rf"(?:\{group}|(?=\s*\Z))"


ASSIGN = re.compile(
    r"(?i)\b([A-Z0-9_.\-]*" + _SECRET_NAME + r"[A-Z0-9_]*\s*=\s*)(['\"])?"
    r"((?(2)" + _quoted_value(2) + r"|(?:[^\s'\";&,\\]|" + _VALUE_AMPERSAND + r")){4,})"
    r"(?(2)" + _quote_closed(2) + ")")
COLON = re.compile(
    # After anything but a name's own characters: a line number (read_file's "4|", grep's
    # "file:4:"), a quote, a bracket, a prompt's ">".
    # A JSON key closes its quote before the colon ("SecretAccessKey": "...").
    r"(?i)(^|[^A-Z0-9_.\-])([A-Z0-9_.\-]*" + _SECRET_NAME + r"[A-Z0-9_]*[\"']?\s*:\s*)"
    # An unquoted value is no other name: "password: password: x" hides x.
    r"(['\"])?((?(3)" + _quoted_value(3) + r"|[^\s'\",}\\]){4,}+)"
    r"(?(3)" + _quote_closed(3) + r"|(?<!:)(?!:))", re.M)
JSON_FIELD = re.compile(
    r"(?i)(\"(?:api_?key|apikey|x-api-key|token|secret|password|passwd|passphrase|access_token|"
    r"refresh_token|id_token|auth_token|bearer|client_secret|secret_key|access_key|"
    r"private_key|credentials?)\"\s*:\s*\")((?:[^\"\\]|\\.){4,})(\")")
# Credentials in a URL's userinfo (``user:pa@ss@host`` after the scheme): up to the
# authority's last '@'.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^/\s:@]*:)([^\s/]+)(@)(?=[^\s@/]*)")
_BREAK = r"\r?\n|(?:\\r)?\\n"
PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    # Cut off: its headers (an encrypted key's Proc-Type and DEK-Info) and whole base64 lines,
    # their breaks real or escaped (in JSON text, in a repr); so it ends where other text
    # starts (a secret's name on the next line, the quote closing a string).
    r"|(?:(?:" + _BREAK + r")+(?:(?:Proc-Type|DEK-Info):[^\r\n\\]*"
    r"|[A-Za-z0-9+/=]+(?=[\s\"'\\]|$)))*)", re.S)

TOKEN_HINTS = ("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glp",
               "glft-", "gldt-", "glrt-", "glcbt-", "glimt-", "glagent-", "gloas-", "xox",
               "xapp-", "aiza", "ya29.", "gocspx-", "akia", "asia", "agpa", "aida", "aroa",
               "anpa", "hf_", "gsk_", "xai-", "r8_", "npm_", "pypi-", "whsec_", "sg.", "pplx-",
               "fc-", "bb_live_",
               "gaaaa", "_v1_", "tvly-", "syt_", "hsk-", "brv_", "ntn_", "shp", "sq0", "key-",
               "-us", "dapi", "figd_", "lin_api_", "eyj")
NAME_HINTS = ("key", "secret", "token", "pass", "pwd", "credential", "auth", "_pat")

# RE2 gates of the patterns above (stages.log.gated): looser, within a line.
_TOKEN_GATE = "(?:" + "|".join(_PREFIXES) + ")"
GATED_TOKEN = Gated(_TOKEN, _TOKEN_GATE)
GATED_USERINFO = Gated(_USERINFO, r"(?i)[a-z][a-z0-9+.\-]*://[^/\s:@]*:[^\s/]+@")
GATED_BEARER = Gated(_BEARER, r"(?i)bearer[ \t]+[A-Za-z0-9._~+/\-]{8}")
GATED_AUTH = Gated(_AUTH, r"(?i)authorization[\"']?[ \t]*[:=]")
GATED_KEY_HEADER = Gated(_KEY_HEADER, r"(?i)(?:x-api-key|api-key|x-auth-token|private-token|"
                         r"x-goog-api-key|ocp-apim-subscription-key|x-functions-key)"
                         r"[\"']?[ \t]*:")
GATED_TWILIO = Gated(_TWILIO, r"SK[0-9a-f]{32}")
GATED_TELEGRAM = Gated(_TELEGRAM, r"\p{Nd}{8,10}:[A-Za-z0-9_\-]{30}")  # re\'s \d: any digit
# A line naming a secret with an operator after the name: where ASSIGN and COLON can match.
NAMED_GATE = re2.compile(r"(?i)(?:key|secret|token|pass|pwd|credential|auth|_pat)[^\n]*?[:=]")
