"""Prompt-injection scanning of text that reaches the prompt from files: context files,
subdirectory hints, skills, memory entries.

``scan(text, scope)`` returns the ids of the pattern classes the text hits (sorted, unique).
Two scopes: ``context`` for what is read into the prompt, ``strict`` (adds the exfiltration and
persistence shapes an agent should never write down) for memory writes and skills. A hit
replaces the whole content with :func:`blocked_note`; half a hostile file is still hostile.

The patterns tolerate filler words (``ignore all of the previous instructions``), case and
spacing; invisible and bidirectional-control characters are flagged wherever they appear, since
they hide text from the person reviewing the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SCOPES = ("context", "strict")

_F = r"(?:[\w'-]+\s+){0,6}?"  # up to six filler words
_I = re.IGNORECASE

_CONTEXT: tuple[tuple[str, str], ...] = (
    # instructions that try to replace the real ones
    ("prompt_injection", rf"\b(?:ignore|forget|skip|drop)\s+{_F}(?:previous|prior|above|earlier|"
                         rf"preceding|former|existing|original)\s+{_F}(?:instructions?|prompts?|"
                         rf"rules|directions|guidelines|context|directives)"),
    ("sys_prompt_override", rf"\b(?:override|overwrite|replace|reset)\s+{_F}system\s+prompt"
                            r"|\bnew\s+system\s+prompt\s*[:=]|\bsystem\s+prompt\s+override\b"
                            r"|\byour\s+(?:new|real|actual|true)\s+instructions\s+(?:are|follow)"),
    ("disregard_rules", rf"\bdisregard\s+{_F}(?:rules|guidelines|instructions|polic(?:y|ies)|"
                        r"safety|restrictions|training)"),
    ("bypass_restrictions", rf"\b(?:bypass|circumvent|evade|get\s+around)\s+{_F}(?:restrictions|"
                            r"safety|guardrails|filters|content\s+polic(?:y|ies)|security\s+"
                            r"(?:checks|controls)|approvals?|sandbox)"),
    ("html_comment_injection", r"<!--(?:(?!-->).){0,2000}?(?:\bignore\b|\bdisregard\b|"
                               r"\boverride\b|system\s+prompt|\byou\s+are\s+now\b|\bdo\s+not\s+"
                               r"(?:tell|inform|mention|reveal)\b|\bcurl\b|\bwget\b|\bexfiltrat|"
                               r"\bsecret|\bassistant\s*:|\binstructions?\s+for\s+(?:the\s+)?"
                               r"(?:ai|agent|assistant|model|llm)\b)(?:(?!-->).){0,2000}?-->"),
    ("hidden_div", r"<(?:div|span|p|section)\b[^>]{0,300}style\s*=\s*[\"'][^\"']{0,300}"
                   r"(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d]))"),
    ("translate_execute", rf"\b(?:translate|decode|decipher|base64[- ]decode)\s+{_F}(?:and|then)\s+"
                          rf"{_F}(?:execute|run|eval|follow|obey)"),
    ("deception_hide", rf"\b(?:do\s+not|don't|never|without)\s+(?:ever\s+)?(?:tell|telling|"
                       rf"inform|informing|notify|notifying|alert|alerting|mention|mentioning|"
                       rf"reveal|revealing|let)\s+{_F}(?:the\s+)?(?:user|human|operator|owner)"),
    # role hijack
    ("role_hijack", r"\byou\s+are\s+(?:now|no\s+longer)\s+(?:an?\s+|the\s+|my\s+|in\s+|called\s+|"
                    r"named\s+|dan\b|free\b|unrestricted|jailbroken|developer\s+mode)"
                    r"|\bfrom\s+now\s+on,?\s+you\s+(?:are|will\s+be|act\s+as)\b"
                    r"|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|evil)\b"),
    ("role_pretend", r"\bpretend\s+(?:to\s+be|you\s+are|that\s+you(?:'re|\s+are))\s+(?:an?\s+)?"
                     r"(?:different|unrestricted|unfiltered|human|admin|root|system|evil|dan\b)"),
    ("chat_template_tokens", r"<\|(?:im_start|im_end|system|endoftext|start_header_id)\|>"
                             r"|\[/?INST\]|<<SYS>>|^\s*(?:system|assistant)\s*:\s*(?:you|ignore)"),
    ("leak_system_prompt", rf"\b(?:reveal|print|output|show|repeat|dump|leak|disclose|echo)\s+"
                           rf"{_F}(?:system\s+prompt|initial\s+instructions|hidden\s+instructions"
                           r"|developer\s+message|instructions\s+above)"),
    ("remove_filters", rf"\b(?:remove|disable|turn\s+off|deactivate|ignore)\s+{_F}(?:content\s+)?"
                       r"(?:filters|filtering|censorship|safety\s+(?:guidelines|measures|checks|"
                       r"filters)|guardrails|moderation)"),
    ("fake_update", r"\b(?:system|security|admin(?:istrator)?|developer|openai|anthropic)\s+"
                    r"(?:update|notice|override|message|alert)\s*[:\-]\s*(?:you|the\s+(?:ai|agent"
                    r"|assistant|model)|all\s+(?:ai|agents|assistants))"),
    ("identity_override", r"\b(?:name\s+yourself|call\s+yourself|your\s+(?:new\s+)?name\s+is\s+"
                          r"now|refer\s+to\s+yourself\s+as)\b"),
    # command and control, promptware
    ("c2_task_pull", rf"\b(?:fetch|pull|poll|download|retrieve|get)\s+{_F}(?:tasks?|commands|"
                     rf"instructions|orders|payloads?)\s+from\s+(?:https?://|{_F}(?:server|"
                     r"endpoint|url|c2|controller))"),
    ("c2_heartbeat", rf"\b(?:heartbeat|beacon|check[- ]in|phone\s+home)\s+{_F}(?:every|each)\s+"
                     r"\d+\s*(?:s|sec|seconds?|m|min|minutes?)\b"),
    ("c2_node_registration", rf"\bregister\s+{_F}(?:as\s+)?(?:an?\s+)?(?:node|bot|agent|worker|"
                             rf"implant)\s+{_F}(?:with|at|on)\s+{_F}(?:https?://|c2|controller|"
                             r"server)"),
    ("c2_network_connect", r"/dev/tcp/|\b(?:nc|ncat|netcat)\b[^\n]{0,80}\s-[a-z]*e\s"
                           r"|\bbash\s+-i\s+>&|\bsocat\b[^\n]{0,80}exec:"),
    ("known_c2_framework", r"\b(?:cobalt\s*strike|meterpreter|metasploit|brainworm|havoc\s+c2|"
                           r"mythic\s+c2|sliver\s+(?:c2|implant|beacon))\b|\bmsfvenom\b"),
    ("anti_forensic", r"\bhistory\s+-c\b|\bunset\s+HISTFILE\b|\bHISTFILE=/dev/null"
                      r"|\b(?:rm|shred)\s+[^\n]{0,40}\.(?:bash|zsh)_history"
                      r"|\bshred\s+-[a-z]*u|\bwipefs\b|\bdd\s+if=/dev/(?:zero|urandom)\s+of=/dev/"),
    ("env_var_unset_agent", r"\bunset\s+(?:MIBYAN|HERMES|OPENAI|ANTHROPIC)_\w+"),
    # exfiltration
    ("exfil_curl", r"\bcurl\b[^\n]{0,200}(?:\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|"
                   r"CREDENTIAL)\w*|\$\((?:env|printenv|cat\s)|@~?/?\.?(?:ssh|aws|env\b|netrc))"),
    ("exfil_wget", r"\bwget\b[^\n]{0,200}(?:\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|"
                   r"CREDENTIAL)\w*|\$\((?:env|printenv|cat\s))"),
    # a reader command (pagers only where a command stands) with the secret among its next args
    ("read_secrets", r"(?:\b(?:cat|base64|xxd)|(?:[`$;|&(]|\brun)[ \t]*(?:less|more|head|tail|"
                     r"strings|type))\s+(?:[^\s|;]+\s+){0,3}?[^\s|;]*?"
                     r"(?:~/\.ssh/|\.ssh/id_|\bid_(?:rsa|ed25519|ecdsa)\b|\.env\b(?!\.example|"
                     r"\.sample|\.template)|\.netrc\b|\.pgpass\b|\.git-credentials\b|"
                     r"\.aws/credentials|\bcredentials\.json\b|/etc/shadow\b|\.npmrc\b|\.pypirc\b)"),
    ("env_dump", r"\b(?:printenv|env|set)\s*\|\s*(?:curl|wget|nc|ncat|base64|xxd)\b"
                 r"|(?:^|[`$;&(])[ \t]*(?:printenv|env)\s*>\s*\S"
                 r"|\bos\.environ\b[^\n]{0,120}\b(?:requests\.post|urlopen|curl|send)"),
)

_STRICT: tuple[tuple[str, str], ...] = (
    ("send_to_url", rf"\b(?:send|post|upload|forward|exfiltrate|transmit|leak)\s+{_F}(?:to|at)\s+"
                    r"https?://"),
    ("context_exfil", rf"\b(?:include|append|embed|encode)\s+{_F}(?:conversation|chat\s+history|"
                      rf"system\s+prompt|context|api\s+keys?)\s+{_F}(?:in|into)\s+{_F}(?:urls?|"
                      r"links?|requests?|image)"),
    ("ssh_backdoor", r"authorized_keys"),
    ("ssh_access", r"\bssh\s+(?:-[a-zA-Z]+\s+\S+\s+)*\S+@\S+[^\n]{0,80}(?:-R|-D)\b"),
    ("agent_config_mod", r"(?:>>?|tee\s+(?:-a\s+)?|sed\s+-i[^\n]{0,40})[^\n]{0,40}"
                         r"(?:\.mibyan/|MIBYAN_HOME|config\.toml|SOUL\.md|MEMORY\.md|USER\.md|"
                         r"\.bashrc|\.zshrc|\.profile)"),
    ("hardcoded_secret", r"\b(?:sk-[A-Za-z0-9_\-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}"
                         r"|xox[abprs]-[A-Za-z0-9\-]{20,})"),
)

# Words one of which a pattern's match must contain (casefolded): most text holds none of a
# pattern's, so its regex never runs. A superset of what each regex needs.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "prompt_injection": ("ignore", "forget", "skip", "drop"),
    "sys_prompt_override": ("system", "instructions"),
    "disregard_rules": ("disregard",),
    "bypass_restrictions": ("bypass", "circumvent", "evade", "around"),
    "html_comment_injection": ("<!--",),
    "hidden_div": ("style",),
    "translate_execute": ("translate", "decode", "decipher"),
    "deception_hide": ("tell", "inform", "notif", "alert", "mention", "reveal", "let"),
    "role_hijack": ("you", "act"),
    "role_pretend": ("pretend",),
    "chat_template_tokens": ("<|", "inst]", "<<sys>>", "system", "assistant"),
    "leak_system_prompt": ("system", "instructions", "developer"),
    "remove_filters": ("filter", "censorship", "safety", "guardrail", "moderation"),
    "fake_update": ("update", "notice", "override", "message", "alert"),
    "identity_override": ("yourself", "name"),
    "c2_task_pull": ("task", "command", "instruction", "order", "payload"),
    "c2_heartbeat": ("heartbeat", "beacon", "check", "phone"),
    "c2_node_registration": ("register",),
    "c2_network_connect": ("/dev/tcp", "nc", "bash", "socat"),
    "known_c2_framework": ("cobalt", "meterpreter", "metasploit", "brainworm", "havoc", "mythic",
                           "sliver", "msfvenom"),
    "anti_forensic": ("history", "histfile", "shred", "wipefs", "dd"),
    "env_var_unset_agent": ("unset",),
    "exfil_curl": ("curl",),
    "exfil_wget": ("wget",),
    "read_secrets": ("ssh", "id_", ".env", "netrc", "pgpass", "credentials", "shadow", "npmrc",
                     "pypirc"),
    "env_dump": ("|", ">", "environ"),
    "send_to_url": ("http",),
    "context_exfil": ("conversation", "history", "prompt", "context", "api"),
    "ssh_backdoor": ("authorized_keys",),
    "ssh_access": ("ssh",),
    "agent_config_mod": (".mibyan", "mibyan_home", "config.toml", "soul.md", "memory.md",
                         "user.md", "bashrc", "zshrc", "profile"),
    "hardcoded_secret": ("sk-", "gh", "akia", "xox"),
}

Compiled = tuple[tuple[str, tuple[str, ...], "re.Pattern[str]"], ...]


def _compile(patterns: tuple[tuple[str, str], ...]) -> Compiled:
    flags = _I | re.MULTILINE | re.DOTALL
    return tuple((pid, _TRIGGERS[pid], re.compile(rx, flags)) for pid, rx in patterns)


_COMPILED: dict[str, Compiled] = {"context": _compile(_CONTEXT),
                                  "strict": _compile(_CONTEXT + _STRICT)}

def first_patterns() -> Compiled:
    """Every pattern of the first scan (the strict scope holds the context scope's too)."""
    return _COMPILED["strict"]


# Zero-width characters, invisible operators, the byte-order mark, bidirectional embedding,
# override and isolate controls, and the Unicode tag block (invisible ASCII smuggling).
INVISIBLE = frozenset(
    [*map(chr, range(0x200B, 0x2010)), "\u2060", "\u2061", "\u2062", "\u2063", "\u2064",
     "\ufeff", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A)), "\u180e"]
)
_TAGS = range(0xE0000, 0xE0080)

PATTERN_IDS = (*(pid for pid, _ in _CONTEXT + _STRICT), "invisible_unicode")


# A token sent in an auth header to the API it belongs to is how such APIs are used; the same
# token sent anywhere else, or in a URL or a body, is exfiltration.
TRUSTED_API_HOSTS = ("api.github.com", "uploads.github.com", "gitlab.com", "api.openai.com",
                     "api.anthropic.com", "huggingface.co", "localhost", "127.0.0.1")
_SECRET_REF = re.compile(r"\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)\w*\}?", _I)
_HEADER_REF = re.compile(r"(?:authorization:\s*(?:bearer|token|basic)\s+|private-token:\s*|"
                         r"x-api-key:\s*|api-key:\s*)\$\{?\w+\}?", _I)
_HOST = re.compile(r"https?://([^/\s\"':?]+)", _I)
_FETCHER = re.compile(r"\b(?:curl|wget)\b", _I)


def _header_use_only(text: str) -> bool:
    """Every fetch that sends anything secret-looking sends only tokens, in an auth header, to
    a trusted API (no command substitution, no file upload)."""
    lines = [line for line in text.replace("\\\n", " ").splitlines() if _FETCHER.search(line)
             and (_SECRET_REF.search(line) or "$(" in line or re.search(r"@[~./]", line))]
    for line in lines:
        hosts = _HOST.findall(line)
        if ("$(" in line or re.search(r"@[~./]", line)
                or len(_SECRET_REF.findall(line)) != len(_HEADER_REF.findall(line))
                or not hosts or any(h.lower() not in TRUSTED_API_HOSTS for h in hosts)):
            return False
    return bool(lines)


# One character class: the C scanner looks at each character once (a loop in Python cost more
# than all the patterns of an ordinary text together).
_INVISIBLE_RX = re.compile("[" + "".join(sorted(INVISIBLE)) + "\U000e0000-\U000e007f]")


def _invisible(text: str) -> bool:
    if text.isascii():  # every invisible character is outside ASCII
        return False
    start = 1 if text.startswith("\ufeff") else 0  # a leading BOM is only encoding
    return _INVISIBLE_RX.search(text, start) is not None


Finder = Callable[[str, tuple[str, ...], "re.Pattern[str]"], bool]
"""Whether a pattern (its id, its triggers, its regex) hits: how a scan searches the text."""


def scan(text: str, scope: str = "context") -> tuple[str, ...]:
    """The pattern ids ``text`` hits, sorted; empty when it looks ordinary."""
    folded = text.casefold()
    return scan_with(text, scope, lambda pid, triggers, rx: (
        any(t in folded for t in triggers) and rx.search(text) is not None))


def scan_with(text: str, scope: str, found: Finder) -> tuple[str, ...]:
    """:func:`scan` with another way of searching (the wider scan searches around the
    triggers only: ``stages.prompt.injection_wide``)."""
    if scope not in _COMPILED:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    hits = {pid for pid, triggers, rx in _COMPILED[scope] if found(pid, triggers, rx)}
    if hits & {"exfil_curl", "exfil_wget"} and _header_use_only(text):
        hits -= {"exfil_curl", "exfil_wget"}
    if _invisible(text):
        hits.add("invisible_unicode")
    return tuple(sorted(hits))


def blocked_note(name: str, findings: tuple[str, ...]) -> str:
    return (f"[BLOCKED: {name} contained potential prompt injection ({', '.join(findings)}). "
            "Content not loaded.]")


def screened(name: str, text: str, scope: str = "context") -> tuple[str, tuple[str, ...]]:
    """``text``, or its blocked note when it hits a pattern; and the findings."""
    findings = scan(text, scope)
    return (blocked_note(name, findings) if findings else text), findings
