"""The dangerous-command detector of rules 3 to 6: a table of regular expressions.

Sessions recorded under those rules replay with it (``stages.tools.dangerous`` picks the
detector by the session's rules); newer sessions read commands with a shell parser
(``stages.tools.shell``). ``detect(command)`` returns the first matching :class:`Danger` or
None. A ``hard`` danger (rm of ``/`` or of a system directory, mkfs, raw disk writes, fork
bombs, killing every process, shutdown) is blocked whatever the settings or approvals; the
others need an approval. ``key`` names the pattern, so that an approval "for the session" or
"always" covers every command of that kind.
"""

from __future__ import annotations

import re

from stages.tools.danger import Danger

__all__ = ["DANGERS", "detect"]

_SYSTEM = (r"(?:/|/\*|~/?|\$HOME/?|/(?:bin|boot|dev|etc|home|lib|lib64|opt|proc|root|sbin|srv|"
           r"sys|usr|var)(?:/\*?)?)")
_RM_RECURSIVE = r"\brm\s+(?:-[a-zA-Z]*[rR][a-zA-Z]*\s+|--recursive\s+|-[a-zA-Z]+\s+)*"
_END = r"(?=$|[\s;&|)])"

_HARD: tuple[tuple[str, str, str], ...] = (
    ("rm_root", _RM_RECURSIVE + r"(?:--no-preserve-root\s+)?(?:-\S+\s+)*" + _SYSTEM + _END,
     "deletes the root, a system directory or the home directory"),
    ("mkfs", r"\bmkfs(?:\.\w+)?\b", "formats a file system"),
    ("raw_disk_write", r"\bdd\b[^;&|]*\bof=/dev/(?:sd|hd|nvme|vd|xvd|mmcblk|disk)"
     r"|>\s*/dev/(?:sd|hd|nvme|vd|xvd|mmcblk|disk)\w*", "writes to a raw disk device"),
    ("fork_bomb", r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:", "is a fork bomb"),
    ("kill_all", r"\bkill\s+(?:-\w+\s+)*-1\b", "kills every process"),
    ("shutdown", r"(?:^|[;&|]\s*|\bsudo\s+)(?:shutdown|reboot|halt|poweroff)\b"
     r"|\b(?:tel)?init\s+[06]\b|\bsystemctl\s+(?:poweroff|reboot|halt|kexec)\b",
     "shuts down or restarts the machine"),
)

_DANGEROUS: tuple[tuple[str, str, str], ...] = (
    ("recursive_delete", r"\brm\s+(?:-\S+\s+)*?(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(?=\s|$)",
     "deletes files recursively"),
    ("find_delete", r"\bfind\b[^;&|]*\s-(?:delete|exec\s+rm)\b", "deletes the files it finds"),
    ("xargs_rm", r"\bxargs\s+(?:-\S+\s+)*rm\b", "deletes a list of files"),
    ("shred", r"\b(?:shred|wipefs)\b", "destroys file contents"),
    ("world_writable", r"\bchmod\s+(?:-\w+\s+)*(?:0?777|a\+w|o\+w|ugo\+w)\b",
     "makes files writable by everyone"),
    ("recursive_chown_chmod", r"\b(?:chown|chmod|chgrp)\s+(?:-\w*R|--recursive)\b",
     "changes owners or permissions recursively"),
    ("system_permissions", r"\b(?:chown|chmod)\s+[^;&|]*\s/(?:etc|usr|bin|sbin|var|boot)\b",
     "changes owners or permissions of system files"),
    ("disk_copy", r"\bdd\s+[^;&|]*\bof=", "writes raw data with dd"),
    ("pipe_to_shell", r"\b(?:curl|wget|fetch)\b[^;&]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b",
     "runs a script downloaded from the network"),
    ("shell_string", r"\b(?:ba|z|da)?sh\s+-c\b|\beval\s", "runs code from a string"),
    ("git_reset_hard", r"\bgit\s+reset\s+[^;&|]*--hard\b", "discards uncommitted work"),
    ("git_force_push", r"\bgit\s+push\b[^;&|]*\s(?:-f|--force(?:-with-lease)?)\b",
     "rewrites a remote branch's history"),
    ("git_clean", r"\bgit\s+clean\s+[^;&|]*-\w*f", "deletes untracked files"),
    ("sql_drop", r"(?i)\b(?:drop\s+(?:table|database|schema)|truncate\s+(?:table\s+)?\w)",
     "drops or empties database tables"),
    ("sql_delete_all", r"(?i)\bdelete\s+from\s+\S+(?![^;]*\bwhere\b)",
     "deletes every row of a table"),
    ("secrets_edit", r">\s*~?/?[\w/.-]*(?:\.ssh/|\.env\b|\.(?:bash|zsh)rc\b|\.profile\b)",
     "overwrites keys, secrets or shell start-up files"),
    ("system_file_write", r">\s*/(?:etc|boot|usr)/", "overwrites a system file"),
    ("kill_processes", r"\b(?:pkill|killall)\b", "kills processes by name"),
    ("service_stop", r"\bsystemctl\s+(?:stop|disable|mask)\b", "stops a system service"),
    ("docker_destroy", r"\bdocker\s+(?:system\s+prune|rm\s+-f|rmi\s+-f|volume\s+rm)\b",
     "removes containers, images or volumes"),
)


def _compiled(table: tuple[tuple[str, str, str], ...], hard: bool) -> tuple[
        tuple[re.Pattern[str], Danger], ...]:
    return tuple((re.compile(pattern), Danger(key=key, description=text, hard=hard))
                 for key, pattern, text in table)


_PATTERNS = _compiled(_HARD, True) + _compiled(_DANGEROUS, False)
DANGERS = {danger.key: danger for _, danger in _PATTERNS}
"""Every kind this table finds, by key (the parser-based detector keeps them)."""
_QUOTES = re.compile(r"""(?<!\\)['"]""")


def detect(command: str) -> Danger | None:
    """The first danger ``command`` matches (hard blocks first), or None."""
    # Quotes around a word hide nothing from the shell (r"m" -rf is rm -rf), so none here.
    text = " ".join(_QUOTES.sub("", command).split())
    for pattern, danger in _PATTERNS:
        if pattern.search(text):
            return danger
    return None
