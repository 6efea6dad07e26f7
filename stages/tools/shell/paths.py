"""Paths as a command names them: normalised (``//``, ``/.``, ``..``, a known working directory)
and sorted into the ones whose loss is a catastrophe, the devices and kernel files, and the
files outside the working tree."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from stages.tools.shell.words import DYN

__all__ = ["KERNEL", "is_disk", "is_protected", "outside_tree", "resolve", "system_file"]

SYSTEM = frozenset({"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32",
                    "opt", "proc", "root", "run", "sbin", "snap", "srv", "sys", "usr", "var",
                    "Users", "System", "Library", "Applications", "Volumes", "private"})
"""Directories of the root whose removal breaks the machine (Linux and macOS)."""

_PARENTS = {"/usr", "/home", "/Users", "/var/lib"}
"""Every directory right inside these is protected too (``/usr/lib``, a user's home)."""

_HOME_ENTRIES = ("Documents", ".ssh", ".bashrc", "a", "src")
"""Entries of a home; a glob matching them (``~/*``, ``~/.*``) covers the whole home."""

_DISK = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk|dm-|md|mapper/|loop|sr|nbd)")
KERNEL = frozenset({"/proc/sysrq-trigger", "/dev/mem", "/dev/kmem", "/dev/port",
                    "/proc/kcore", "/sys/power/state", "/proc/sys/kernel/sysrq"})
"""Files whose write crashes, reboots or corrupts the running kernel."""

_SAFE_WRITES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/", "/dev/shm/",
                "/tmp/", "/var/tmp/", "/proc/self/fd/")
_SYSTEM_FILES = ("/etc/", "/boot/", "/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/")


def resolve(path: str, cwd: str | None) -> str:
    """``path`` normalised; a relative one joined to ``cwd`` when the command set it."""
    if cwd is not None and not path.startswith(("/", "~")):
        path = posixpath.join(cwd, path)
    if not path.startswith(("/", "~")):
        return path
    head, sep, rest = path.partition("/")
    if head.startswith("~"):  # ~, ~user, ~/x: the home stays symbolic
        if not sep:
            return head
        tail = posixpath.normpath("/" + rest).lstrip("/")
        return f"{head}/{tail}" if tail else head
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal  # `//x` is `/x`


def _glob(segment: str) -> bool:
    return any(c in segment for c in "*?[")


def is_protected(path: str) -> bool:
    """The root, a system directory, a home (``~``, ``~user``, ``/home/x``) or a glob over one
    of them: what no command should delete or move."""
    if DYN in path or not path.startswith(("/", "~")):  # relative: inside the working tree
        return False
    if path in ("/", "/var/lib"):
        return True
    parent, _, name = path.rpartition("/")
    if path.startswith("~") and "/" not in path:
        return True
    if parent.startswith("~") and "/" not in parent:
        return any(fnmatch.fnmatchcase(entry, name) for entry in _HOME_ENTRIES) and _glob(name)
    if parent == "":
        return name in SYSTEM or (_glob(name) and any(
            fnmatch.fnmatchcase(entry, name) for entry in SYSTEM))
    if _glob(name) and parent[1:] in SYSTEM:  # /boot/*, /etc/*
        return True
    return parent in _PARENTS and (not name.startswith(".") or _glob(name))


def is_disk(path: str) -> bool:
    """A block device: writing to it destroys a file system."""
    return bool(_DISK.match(path))


def system_file(path: str) -> bool:
    return path.startswith(_SYSTEM_FILES) or (path.startswith(("/proc/", "/sys/"))
                                              and path not in KERNEL)


def outside_tree(path: str) -> bool:
    """A file that is neither in the working tree nor a scratch or standard stream path."""
    if DYN in path or path.startswith(_SAFE_WRITES):
        return False
    return path.startswith(("/", "~")) or path == ".." or path.startswith("../")
