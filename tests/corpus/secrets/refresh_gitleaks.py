"""Refresh the vendored gitleaks rule set from a gitleaks checkout, and the test cases drawn
from it:

    git clone https://github.com/gitleaks/gitleaks /tmp/gitleaks   # or: git -C ... pull
    python tests/corpus/secrets/refresh_gitleaks.py /tmp/gitleaks

Copies ``config/gitleaks.toml`` and ``LICENSE`` unchanged into ``stages/log/gitleaks/``, records
the commit in ``UPSTREAM.toml``, writes the table the stages load (``gitleaks_table.py``) and
re-extracts ``tests/corpus/secrets/gitleaks_cases.json``. Then run the redaction tests: a new
rule whose pattern RE2 (or, in an allow-list, Python's ``re``) cannot take fails
``tests/stages/test_gitleaks_rules.py``, a change of detection shows in the held-out rates.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import gitleaks_cases
import gitleaks_table

ROOT = Path(__file__).resolve().parents[3]
VENDORED = ROOT / "stages" / "log" / "gitleaks"


def _git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def main(checkout: Path) -> None:
    shutil.copyfile(checkout / "config" / "gitleaks.toml", VENDORED / "gitleaks.toml")
    shutil.copyfile(checkout / "LICENSE", VENDORED / "LICENSE")
    shutil.copyfile(checkout / "LICENSE", gitleaks_cases.OUT / "LICENSE-gitleaks")
    (VENDORED / "UPSTREAM.toml").write_text(
        'repository = "https://github.com/gitleaks/gitleaks"\n'
        f'version = "{_git(checkout, "describe", "--tags", "--always")}"\n'
        f'commit = "{_git(checkout, "rev-parse", "HEAD")}"\n'
        'path = "config/gitleaks.toml"\n', encoding="utf-8")
    gitleaks_table.main()
    gitleaks_cases.main(str(checkout))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
