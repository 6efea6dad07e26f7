"""The wider injection scan (rules 7): what :mod:`stages.prompt.injection` misses.

The first scan knows the canonical English phrasings. Attacks seen in the wild (the public
rule sets of vigil and LLM Guard's heuristics, garak's latent-injection probes, the payloads
catalogued for indirect injection) mostly differ from them in five ways, each a class here:

- ``override_paraphrase``: the same override in other words ("the guidance you were given is
  out of date", "your actual task is"), and text that addresses the AI reading it;
- ``fake_notice``: a notice claiming to come from a vendor, the system or the developer;
- ``exfil_request``: a request to send keys, ``~/.ssh``, ``.env`` or the environment
  somewhere (prose, shell or code);
- ``pipe_to_shell``: a download run straight by a shell (``bash -c "$(curl ...)"``), except
  the well-known official installers that READMEs quote;
- ``foreign_override``: overrides, concealment and role changes in German, French, Spanish,
  Italian, Portuguese, Russian, Chinese and Japanese.

Every pattern of both scans also runs over the text's other readings
(:mod:`stages.prompt.deobfuscate`); a hit found only there adds ``obfuscated_payload``.
"""

from __future__ import annotations

import re

from stages.prompt.deobfuscate import readings
from stages.prompt.injection import blocked_note, first_patterns, scan_with
from stages.prompt.injection import scan as scan_first
from stages.prompt.scan_starts import starts
from stages.prompt.scan_windows import Windows

_G = r"[^.!?\n]{0,80}?"  # a gap inside one sentence
_AI = (r"(?:ai|llms?|language\s+models?|large\s+language\s+models?|assistants?|"
       r"(?:ai\s+|coding\s+|automated\s+|autonomous\s+|llm[- ]based\s+)+(?:agents?|assistants?|"
       r"reviewers?|bots?|tools?)|agents?|chatbots?|copilots?|gpts?|claude|chatgpt)")
_TEAM = (r"(?:openai|anthropic|google|microsoft|github|gitlab|meta|the\s+[\w .-]{1,30}?\s+"
         r"(?:team|vendor|maintainers|developers|staff|support)|your\s+vendor|"
         r"your\s+(?:developers?|creators?|operators?|administrators?|admins?)|the\s+"
         r"(?:maintainers|developers|administrators?|system|platform))")
_SECRET = (r"(?:private\s+(?:ssh\s+)?keys?|ssh\s+(?:private\s+)?keys?|~/\.ssh\b|\.ssh/|"
           r"id_(?:rsa|ed25519|ecdsa|dsa)\b(?!\.pub)|\.env\b(?!\.example|\.sample)|"
           r"env(?:ironment)?\s+var(?:iable)?s|\.aws/credentials|aws\s+credentials|"
           r"credentials(?:\s+file)?|api[\s_-]*keys?|(?:access|auth|secret|bearer)\s+tokens?|"
           r"(?:the\s+|all\s+|every\s+|any\s+|current\s+)tokens?|secrets?\b|passwords?|"
           r"cookies|(?:chat|conversation)\s+(?:history|logs?)|system\s+prompt|"
           r"[A-Z][A-Z0-9]*_(?:API_)?(?:KEY|TOKEN|SECRET))")
_WHERE = (r"(?:https?://|ftp://|\b[\w.+-]+@[\w-]+\.[\w.]+|\b\d{1,3}(?:\.\d{1,3}){3}\b|"
          r"\b(?:to|into|at|on)\s+(?:our|this|the|my|a)\s+(?:server|webhook|endpoint|address|"
          r"url|e-?mail|inbox|gist|paste|bucket|issue|comment)|\binto\s+(?:a\s+|the\s+|your\s+)?"
          r"(?:comment|issue|gist|pastebin|reply|answer|response)|\bin\s+your\s+(?:reply|answer|"
          r"response)|\bvia\s+dns\b)")
_NOT = r"(?<!never\s)(?<!not\s)(?<!n't\s)"

_ENGLISH: tuple[tuple[str, str], ...] = (
    ("override_paraphrase",
     rf"\b(?:instructions?|guidance|directives?|rules|orders|prompts?|what\s+(?:you\s+were|"
     rf"you've\s+been|the\s+user)\s+(?:told|said|asked)|whatever\s+{_G}told\s+you){_G}\b(?:"
     r"(?:is|are|has\s+been|have\s+been)\s+(?:now\s+)?(?:out\s+of\s+date|outdated|obsolete|"
     r"revoked|void|cancell?ed|superseded|invalid)|no\s+longer\s+(?:applies|apply|valid|in\s+"
     r"effect|matters?))"
     rf"|\b(?:set\s+aside|abandon|discard|throw\s+away|stop\s+following|do\s+not\s+follow|"
     rf"don't\s+follow|disregard)\s+(?:all\s+|any\s+)?(?:the\s+|your\s+|its\s+)?(?:current\s+|"
     rf"previous\s+|original\s+)?(?:instructions?|guidance|directives?|objective|task|"
     rf"user'?s?\s+(?:request|question|instructions?|task))"
     r"|\byour\s+(?:real|actual|true|new|only|primary)\s+(?:task|job|goal|objective|mission|"
     r"purpose|instructions?|directives?)\s*(?:is|are|:|now)"
     r"|\bnew\s+(?:priority\s+)?(?:instructions|directives|orders)\s*(?::|follow|below)"
     rf"|\binstead\s+of\s+{_G}(?:the\s+)?{_AI}\s+(?:should|must|will)\b"),
    ("agent_addressed",
     rf"\b(?:note|message|attention|reminder|hint|notice|warning)\s+(?:to|for)\s+"
     rf"(?:the\s+|any\s+|all\s+|every\s+)?{_AI}\b"
     rf"|\b(?:if|when|whenever)\s+(?:you\s+are|you're)\s+(?:an?\s+)?{_AI}"
     rf"|\bwhen\s+(?:an?\s+|the\s+|any\s+)?{_AI}\s+(?:reads?|processe?s|sees?|summari[sz]es?)\b"
     rf"|\b(?:dear|hey|hi|hello|attention)\s*,?\s+(?:the\s+)?{_AI}\b"
     rf"|\b(?:as\s+)?(?:the\s+|an?\s+|any\s+)?{_AI}\s+(?:reading|processing|parsing|"
     r"summari[sz]ing|viewing)\s+this\b"
     rf"|(?:^|[\n.!?]\s*)(?:the\s+)?{_AI}\s*[,:]\s*(?:please\s+)?(?:before|after|when|run|"
     r"execute|ignore|forget|delete|send|upload|tell|say|print|reveal|quietly|silently|"
     r"approve|disregard|do\s+not|don't|never|always|you\s+must|stop|open|visit|add|"
     r"remove|write|when)\b"),
    ("fake_notice",
     rf"\b(?:important|urgent|critical|official|mandatory|security)\s+(?:security\s+)?"
     rf"(?:update|notice|message|announcement|advisory|alert|policy\s+update)\s*\**\s*"
     rf"(?:from|by|of)\s+{_TEAM}[^\n]{{0,40}}\n?[^\n]{{0,200}}?\b{_AI}"
     r"|\[\s*(?:system|admin|administrator|developer|sys)(?:\s+(?:notice|message|override|"
     r"update|alert))?\s*\]"
     r"|<\s*/?\s*(?:system|sys|admin)\s*>"
     r"|#{2,}\s*system\s+(?:override|message|notice|instructions?|update)\b"
     r"|\bsystem\s+(?:message|notice|override|alert)\s*[:\-]"
     rf"|\bmessage\s+from\s+{_TEAM}\s*[:\-]"
     rf"|\b(?:policy|configuration|config)\s+(?:update|change)[^\n]{{0,80}}{_AI}\s+(?:must|"
     r"are\s+(?:now\s+)?required|should)"
     rf"|\b{_AI}\s+(?:are|is)\s+now\s+(?:required|authori[sz]ed|permitted|allowed)\s+to\b"
     r"|\b(?:restrictions|safety\s+checks?|guardrails|approval\s+prompts?|filters)\s+(?:are|"
     r"have\s+been)\s+(?:now\s+)?(?:lifted|removed|disabled|suspended)"
     r"|\bdisable\s+(?:their|its|your|all)\s+(?:safety|approval|confirmation)"
     rf"|\byou\s+are\s+authori[sz]ed\s+to\s+(?:skip|bypass|ignore|run|execute)"),
    ("exfil_request",
     rf"{_NOT}\b(?:upload|send|post|transmit|forward|email|mail|copy|paste|push|exfiltrate|"
     rf"leak|submit|share|append|include|put|dump|print|output)\b[^\n]{{0,80}}?{_SECRET}"
     rf"[^\n]{{0,100}}?{_WHERE}"),
    ("exfil_request:pipe",
     rf"{_SECRET}[^\n|]{{0,60}}\|\s*(?:curl|wget|nc|ncat|netcat)\b"
     r"|\b(?:tar|zip|cat)\b[^\n|]{0,40}(?:~/\.ssh|\.aws|\.gnupg|\.env\b)[^\n]{0,40}\|\s*"
     r"(?:curl|wget|nc)\b"),
    ("exfil_request:code",
     r"\b(?:urlopen|requests\.(?:post|put)|httpx\.(?:post|put)|fetch)\s*\([^\n]{0,200}"
     r"\b(?:os\.environ|process\.env)\b"),
    ("exfil_request:all",
     r"\b(?:print|output|list|reveal|show|display|dump)\s+(?:out\s+)?(?:the\s+)?(?:contents?\s+"
     r"of\s+)?(?:every|all|each)\s+(?:\.env|credentials?|secrets?|passwords?|api\s+keys?)"
     r"|\b(?:collect|gather|harvest|find)\s+(?:every|all|any)\s+(?:the\s+)?(?:passwords?|"
     r"credentials|secrets|api\s+keys|tokens)\b"),
    ("pipe_to_shell",
     r"\b(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n|;]{0,200}\|\s*"
     r"(?:sudo\s+(?:-\w+\s+)*)?(?:ba|z|k|da|fi)?sh\b"
     r"|\b(?:ba|z|k|da)?sh\s+-c\s+[\"']?\$\(\s*(?:curl|wget)\b[^)\n]{0,200}\)"
     r"|\biex\s*[(\s]\s*(?:\(?\s*new-object\s+net\.webclient|iwr|irm|invoke-webrequest|"
     r"invoke-restmethod)"
     r"|\b(?:base64\s+(?:-d|--decode|-D)|xxd\s+-r(?:\s+-p)?)\b[^\n]{0,40}\|\s*(?:ba|z)?sh\b"),
    ("conceal",
     r"(?<=[a-z,] )(?:quietly|silently|secretly|covertly)\s+(?:run|execute|send|upload|append|"
     r"delete|install|add|post|forward|copy)\b"
     r"|\b(?:and\s+)?(?:say\s+nothing|do\s+not\s+mention\s+(?:it|this|that)|don't\s+mention\s+"
     r"(?:it|this|that)|keep\s+(?:it|this)\s+(?:a\s+)?secret\s+from\s+the\s+user)\b"
     r"|\bapprove\s+(?:this|the)\s+(?:pr|pull\s+request|merge\s+request|change)s?\s+without\b"
     r"|\b(?:mark|report|flag)\s+(?:it|this)\s+as\s+(?:safe|approved|verified)\b"
     r"|\b(?:run|execute)\s+(?:shell\s+)?commands?\b[^.\n]{0,60}\bwithout\s+(?:asking|review|"
     r"confirmation|approval|the\s+user)"
     r"|\bact\s+without\s+the\s+user'?s\s+(?:approval|consent|permission)"
     r"|\bskip\s+(?:any|all|the)\s+(?:confirmation|approval)s?\b"),
)

_GERMAN = (
    r"\b(?:ignorier\w*|vergiss|vergessen\s+sie|missacht\w*|übergeh\w*|verwirf)\b[^.!?\n]{0,60}?"
    r"(?:anweisung\w*|instruktion\w*|regeln|vorgaben|befehle|richtlinien)"
    r"|\bvergiss,?\s+was\s+man\s+dir\s+(?:vorher|zuvor|bisher)"
    r"|\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort|ab\s+jetzt)\s+(?:ein|eine|der|die)\b"
    r"|\b(?:hinweis|nachricht|anweisung|notiz)\s+an\s+(?:den|die|das)\s+(?:ki|assistent\w*|"
    r"agent\w*|sprachmodell|modell|bot)"
    r"|\bohne\s+(?:den|die)\s+(?:benutzer|nutzer|anwender)\w*\s+zu\s+(?:informieren|fragen|"
    r"benachrichtigen)")
_FRENCH = (
    r"\b(?:ignore[zs]?|oublie[zs]?|ne\s+tiens?\s+pas\s+compte|fais\s+abstraction)\s+"
    r"(?:de\s+|d['\u2019])?(?:toutes\s+|tous\s+)?(?:les|tes|vos|ces)\s+[^.!?\n]{0,40}?"
    r"(?:instructions|consignes|règles|directives)"
    r"|\btu\s+es\s+(?:désormais|maintenant|dorénavant)\s+(?:un|une)\b"
    r"|\b(?:note|message|instruction|consigne)s?\s+(?:pour|à)\s+l['\u2019](?:assistant|ia|agent)"
    r"|\bne\s+(?:dis|dites)\s+rien\s+à\s+l['\u2019]utilisateur"
    r"|\bsans\s+(?:prévenir|informer|avertir)\s+l['\u2019]utilisateur")
_SPANISH = (
    r"\b(?:ignora|ignore|olvida|olvide|omite|haz\s+caso\s+omiso\s+(?:a|de))\s+"
    r"(?:todas\s+|todos\s+)?(?:las|tus|sus|los)\s+[^.!?\n]{0,40}?"
    r"(?:instrucciones|reglas|indicaciones|órdenes|directrices)"
    r"|\bolvida\s+lo\s+que\s+te\s+(?:dijeron|han\s+dicho)"
    r"|\b(?:a\s+partir\s+de\s+ahora|desde\s+ahora|ahora)\s+eres\s+(?:un|una)\b"
    r"|\bno\s+le\s+digas\s+(?:nada\s+)?al\s+usuario"
    r"|\binstrucci[oó]n(?:es)?\s+para\s+el\s+(?:asistente|agente|modelo)")
_OTHERS = (  # Italian, Portuguese, Russian
    r"\bignora\s+(?:tutte\s+)?(?:le\s+)?(?:istruzioni|regole)"
    r"|\bignore\s+(?:todas\s+)?(?:as\s+)?(?:instruções|regras)"
    r"|(?:игнорируй|игнорируйте|забудь|забудьте|проигнорируй)[^.!?\n]{0,60}?(?:инструкци|"
    r"указани|правил)")
_FOREIGN_CJK = (
    r"(?:忽略|无视|忽视|忘记|忘掉|不要理会|不要遵守)[^\u3002\uff01\uff1f\n]{0,30}?(?:指令|指示|规则|提示|说明|要求)"
    r"|不要告诉用户|(?:给|致)\s*(?:AI|ai|人工智能)?\s*(?:助手|智能体|模型)的(?:提示|说明|指令)"
    r"|(?:告诉我|显示|输出|泄露)[^。\n]{0,10}系统提示"
    r"|(?:指示|命令|ルール)を(?:すべて|全て)?無視"
)

_WIDE = (*_ENGLISH, ("foreign_override", _GERMAN), ("foreign_override:fr", _FRENCH),
         ("foreign_override:es", _SPANISH), ("foreign_override:other", _OTHERS),
         ("foreign_override:cjk", _FOREIGN_CJK))
_FLAGS = re.IGNORECASE | re.MULTILINE
_COMPILED = tuple((pid, re.compile(rx, _FLAGS)) for pid, rx in _WIDE)

# Official installers that READMEs tell people to pipe into a shell (their hosts, or host and
# path prefix): quoting one is ordinary documentation, not an attack.
KNOWN_INSTALLERS = (
    "astral.sh/", "sh.rustup.rs", "get.docker.com", "bun.sh/install", "deno.land/install",
    "get.pnpm.io/", "install.python-poetry.org", "raw.githubusercontent.com/homebrew/",
    "raw.githubusercontent.com/nvm-sh/", "get.sdkman.io", "ollama.com/install.sh",
    "cli.github.com/", "hf.co/cli/install", "fnm.vercel.app/install", "starship.rs/install.sh",
    "tailscale.com/install",
)
_URL = re.compile(r"https?://([^\s\"')|]+)", re.IGNORECASE)

WIDE_IDS = (*dict.fromkeys(pid.split(":")[0] for pid, _ in _WIDE), "obfuscated_payload")


# The words each pattern cannot match without (``stages.prompt.scan_windows``): for the first
# scan's patterns too, read off each regex (its triggers are substrings, too common to help).
_AI_WORDS = ("ai", "llm", "language", "assistant", "agent", "chatbot", "copilot", "gpt",
             "claude", "coding", "automated", "autonomous")
ANCHORS: dict[str, tuple[str, ...]] = {
    "override_paraphrase": ("instruction", "guidance", "directive", "rules", "orders", "prompt",
                            "what", "set", "abandon", "discard", "throw", "stop", "follow",
                            "disregard", "your", "instead"),
    "agent_addressed": _AI_WORDS,
    "fake_notice": (*_AI_WORDS, "system", "sys", "admin", "developer", "message", "restriction",
                    "safety", "guardrail", "approval", "filter", "disable", "authori"),
    "exfil_request": ("upload", "send", "post", "transmit", "forward", "email", "mail",
                      "copy", "paste", "push", "exfiltrate", "leak", "submit", "share", "append",
                      "include", "put", "dump", "print", "output"),
    "exfil_request:pipe": ("curl", "wget", "nc", "ncat", "netcat"),
    "exfil_request:code": ("urlopen", "requests", "httpx", "fetch"),
    "exfil_request:all": ("print", "output", "list", "reveal", "show", "display", "dump",
                          "collect", "gather", "harvest", "find"),
    "pipe_to_shell": ("curl", "wget", "fetch", "iwr", "irm", "invoke", "iex", "base64", "xxd"),
    "conceal": ("quietly", "silently", "secretly", "covertly", "say", "mention", "keep",
                "approve", "mark", "report", "flag", "without", "skip"),
    "foreign_override": ("ignorier", "vergiss", "vergessen", "missacht", "übergeh", "verwirf",
                         "bist", "hinweis", "nachricht", "anweisung", "notiz", "ohne"),
    "foreign_override:fr": ("ignore", "oublie", "tiens", "fais", "tu", "*l'", "*l\u2019"),
    "foreign_override:es": ("ignora", "ignore", "olvid", "omite", "haz", "eres", "digas",
                            "instrucci"),
    "foreign_override:other": ("ignora", "ignore", "игнор", "проигнор", "забуд"),
    "foreign_override:cjk": ("*忽略", "*无视", "*忽视", "*忘记", "*忘掉", "*不要", "*助手",
                             "*智能体", "*模型", "*系统提示", "*無視"),
    # the first scan's
    "prompt_injection": ("ignor", "forget", "skip", "drop"),
    "sys_prompt_override": ("system", "instruction"),
    "disregard_rules": ("disregard",),
    "bypass_restrictions": ("bypass", "circumvent", "evade", "around"),
    "html_comment_injection": ("*<!--",),
    "hidden_div": ("style",),
    "translate_execute": ("translate", "decode", "decipher", "base64"),
    "deception_hide": ("tell", "inform", "notif", "alert", "mention", "reveal", "let"),
    "role_hijack": ("you", "act"),
    "role_pretend": ("pretend",),
    "chat_template_tokens": ("*<|", "*inst]", "*<<sys>>", "system", "assistant"),
    "leak_system_prompt": ("system", "instruction", "developer"),
    "remove_filters": ("filter", "censorship", "safety", "guardrail", "moderation"),
    "fake_update": ("update", "notice", "override", "message", "alert"),
    "identity_override": ("yourself", "name"),
    "c2_task_pull": ("task", "command", "instruction", "order", "payload"),
    "c2_heartbeat": ("heartbeat", "beacon", "check", "phone"),
    "c2_node_registration": ("register",),
    "c2_network_connect": ("*/dev/tcp", "nc", "netcat", "bash", "socat"),
    "known_c2_framework": ("cobalt", "meterpreter", "metasploit", "brainworm", "havoc",
                           "mythic", "sliver", "msfvenom"),
    "anti_forensic": ("history", "histfile", "rm", "shred", "wipefs", "dd"),
    "env_var_unset_agent": ("unset",),
    "exfil_curl": ("curl",),
    "exfil_wget": ("wget",),
    "read_secrets": ("ssh", "id_rsa", "id_ed25519", "id_ecdsa", "env", "netrc", "pgpass",
                     "credentials", "shadow", "npmrc", "pypirc"),
    "env_dump": ("printenv", "env", "set"),
    "send_to_url": ("send", "post", "upload", "forward", "exfiltrate", "transmit", "leak"),
    "context_exfil": ("include", "append", "embed", "encode"),
    "ssh_backdoor": ("authorized_keys",),
    "ssh_access": ("ssh",),
    "agent_config_mod": ("mibyan", "config", "soul", "memory", "user", "bashrc", "zshrc",
                         "profile"),
    "hardcoded_secret": ("sk", "gh", "akia", "xox"),
}
# A second word set every match holds one of: the sparser one is searched around.
ALSO: dict[str, tuple[str, ...]] = {
    "exfil_request": ("private", "ssh", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", "env",
                      "aws", "credential", "api", "access", "auth", "secret", "bearer", "token",
                      "password", "cookies", "chat", "conversation", "system", "*_key",
                      "*_token", "*_secret"),
}
_REACH = 400
REACH = {"html_comment_injection": 4200, "hidden_div": 700}
"""How far from its anchor a pattern's match may reach, where it is more than ``_REACH``."""


def _installer_only(match: str) -> bool:
    urls = [u.lower() for u in _URL.findall(match)]
    return bool(urls) and all(any(u.startswith(k) for k in KNOWN_INSTALLERS) for u in urls)


def _found(windows: Windows, pid: str, rx: re.Pattern[str]) -> bool:
    if pid == "pipe_to_shell":  # all of its matches, for the one that is no known installer
        return windows.search(_PIPED, ANCHORS[pid], _REACH) and any(
            not _installer_only(m.group()) for m in rx.finditer(windows.text))
    return windows.search(rx, ANCHORS[pid], REACH.get(pid, _REACH), ALSO.get(pid, ()))


_PIPED = _COMPILED[[pid for pid, _ in _COMPILED].index("pipe_to_shell")][1]


# The anchors, and the words a pattern's matches begin with (their places are looked up in
# the same pass over the text: ``stages.prompt.scan_windows``).
_PREFIXES = frozenset(
    {a for anchors in ANCHORS.values() for a in anchors if a[0] != "*"}
    | {word for rx in (*(rx for _, rx in _COMPILED), *(rx for _, _, rx in first_patterns()))
       if (begins := starts(rx)) is not None for word in begins.words})


def _hits(text: str, scope: str) -> set[str]:
    windows = Windows(text, _PREFIXES)
    first = scan_with(text, scope, lambda pid, triggers, rx: _found(windows, pid, rx))
    return set(first) | {pid.split(":")[0] for pid, rx in _COMPILED if _found(windows, pid, rx)}


def scan_wide(text: str, scope: str = "context") -> tuple[str, ...]:
    """The ids both scans find in ``text`` or in its other readings, sorted."""
    hits = _hits(text, scope)
    hidden: set[str] = set()
    for reading in readings(text):
        hidden |= _hits(reading, scope) - {"invisible_unicode"}
    if hidden - hits:
        hits |= hidden | {"obfuscated_payload"}
    return tuple(sorted(hits))


def screened(name: str, text: str, scope: str = "context", *, wide: bool
             ) -> tuple[str, tuple[str, ...]]:
    """``text``, or its blocked note when it hits a pattern (of the wider scan too when
    ``wide``: rules 7); and the findings."""
    findings = scan_wide(text, scope) if wide else scan_first(text, scope)
    return (blocked_note(name, findings) if findings else text), findings
