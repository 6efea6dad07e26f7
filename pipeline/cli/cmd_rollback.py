"""The body of ``mibyan rollback SESSION [--turn N]`` (parser in main.py).

The session need not be open: its log names the checkpoints, the tree is restored from the
shadow repository under the home, and the rollback is a log line (a session open in a chat
rolls back through ``/rollback``, which records it in the session).
"""

from __future__ import annotations

import argparse

from pipeline import config as cfg
from pipeline.printable import printable
from stages.log.events import TreeRestored

EXIT_OK = 0


def restored_line(done: TreeRestored) -> str:
    return (f"restored {done.tree} to before turn {done.turn}: {done.restored} file(s) "
            f"restored, {done.removed} removed (undo: checkpoint {done.saved})")


def rollback(args: argparse.Namespace) -> int:
    from pipeline.shell.rollback import checkpoint_for, roll_back
    home = args.home or cfg.home()
    target = checkpoint_for(home, args.session, args.turn)
    print(printable(restored_line(roll_back(home, target, session_id=args.session))))
    return EXIT_OK
