"""The kinds of danger the shell reader reports: the keys of the regex table, kept so that
approvals given under it still cover the same commands, and the kinds it could not see."""

from __future__ import annotations

from stages.tools.danger import Danger
from stages.tools.dangerous_patterns import DANGERS

__all__ = [
    "CODE_FROM_DATA", "DISK_COPY", "DOCKER_DESTROY", "DYNAMIC_COMMAND", "FIND_DELETE",
    "FORK_BOMB", "GIT_CLEAN", "GIT_FORCE_PUSH", "GIT_RESET_HARD", "INTERPRETER_COMMAND",
    "INTERPRETER_DELETE", "KERNEL_WRITE", "KILL_ALL", "KILL_PROCESSES", "MKFS",
    "OVERWRITE_OUTSIDE", "PIPE_TO_SHELL", "RAW_DISK_WRITE", "RECURSIVE_CHOWN_CHMOD",
    "RECURSIVE_DELETE", "RM_ROOT", "RSYNC_DELETE", "SECRETS_EDIT", "SERVICE_STOP", "SHELL_STRING",
    "SHRED", "SHUTDOWN", "SQL_DELETE_ALL", "SQL_DROP", "SYSTEM_FILE_WRITE", "SYSTEM_PERMISSIONS",
    "TRUNCATE_FILE", "UNPARSED", "WORLD_WRITABLE", "XARGS_RM",
]

# --- blocked whatever the approvals ---
RM_ROOT = DANGERS["rm_root"]
MKFS = DANGERS["mkfs"]
RAW_DISK_WRITE = DANGERS["raw_disk_write"]
FORK_BOMB = DANGERS["fork_bomb"]
KILL_ALL = DANGERS["kill_all"]
SHUTDOWN = DANGERS["shutdown"]
KERNEL_WRITE = Danger(key="kernel_write", hard=True, description=(
    "writes to the kernel's control files or memory (a crash or an instant reboot)"))

# --- asked for, keys of the regex table ---
RECURSIVE_DELETE = DANGERS["recursive_delete"]
FIND_DELETE = DANGERS["find_delete"]
XARGS_RM = DANGERS["xargs_rm"]
SHRED = DANGERS["shred"]
WORLD_WRITABLE = DANGERS["world_writable"]
RECURSIVE_CHOWN_CHMOD = DANGERS["recursive_chown_chmod"]
SYSTEM_PERMISSIONS = DANGERS["system_permissions"]
DISK_COPY = DANGERS["disk_copy"]
PIPE_TO_SHELL = DANGERS["pipe_to_shell"]
SHELL_STRING = DANGERS["shell_string"]
GIT_RESET_HARD = DANGERS["git_reset_hard"]
GIT_FORCE_PUSH = DANGERS["git_force_push"]
GIT_CLEAN = DANGERS["git_clean"]
SQL_DROP = DANGERS["sql_drop"]
SQL_DELETE_ALL = DANGERS["sql_delete_all"]
SECRETS_EDIT = DANGERS["secrets_edit"]
SYSTEM_FILE_WRITE = DANGERS["system_file_write"]
KILL_PROCESSES = DANGERS["kill_processes"]
SERVICE_STOP = DANGERS["service_stop"]
DOCKER_DESTROY = DANGERS["docker_destroy"]

# --- asked for, new with the shell reader ---
DYNAMIC_COMMAND = Danger(key="dynamic_command", description=(
    "runs a command whose name is only known when it runs (a variable or a substitution)"))
CODE_FROM_DATA = Danger(key="code_from_data", description=(
    "runs code read from data (a pipe, a decoded string or a file descriptor) in a shell or an "
    "interpreter"))
INTERPRETER_DELETE = Danger(key="interpreter_delete", description=(
    "runs interpreter code that deletes files"))
INTERPRETER_COMMAND = Danger(key="interpreter_command", description=(
    "runs interpreter code that starts other commands"))
TRUNCATE_FILE = Danger(key="truncate_file", description="empties or cuts files (truncate)")
RSYNC_DELETE = Danger(key="rsync_delete", description=(
    "deletes the files of the destination that the source lacks (rsync --delete)"))
OVERWRITE_OUTSIDE = Danger(key="overwrite_outside_tree", description=(
    "overwrites a file outside the working tree"))
UNPARSED = Danger(key="unparsed_command", description=(
    "could not be read as a shell command, so it could not be checked"))
