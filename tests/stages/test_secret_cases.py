"""Redaction measured on cases it was not tuned on: gitleaks' own test cases (a fifth of the
rule families held out, see tests/corpus/secrets/README.md) and real source files."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from stages.log.gitleaks.scan import find_secrets
from stages.log.redact import redact
from tests.stages.secret_cases import cases

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_held_out_part_is_a_fifth_and_large_enough() -> None:
    held_tps, held_fps = cases(held_out=True)
    tune_tps, _ = cases(held_out=False)
    assert len(held_tps) >= 500 and len(held_fps) >= 40
    assert 0.1 < len(held_tps) / (len(held_tps) + len(tune_tps)) < 0.35


def test_true_positives_held_out_are_masked() -> None:
    tps, _ = cases(held_out=True)
    missed = [(rule, text) for rule, text in tps if redact(text) == text]
    assert len(missed) / len(tps) <= 0.05, missed[:20]


def test_false_positives_held_out_are_left_alone() -> None:
    """A case gitleaks lists as a false positive of one rule and its default rule set as a
    whole still reports (another rule finds a secret in it) is a finding of the reference
    scanner, not a text it leaves alone: those are not counted."""
    _, fps = cases(held_out=True)
    alone = [(rule, text) for rule, text in fps if not find_secrets(text)]
    altered = [(rule, text) for rule, text in alone if redact(text) != text]
    assert len(alone) >= 0.8 * len(fps)
    assert len(altered) / len(alone) <= 0.05, altered


# A password in a URL's userinfo is a credential wherever it stands, an example in a
# docstring too (httpx's "https://jo%40email.com:a%20secret@..."): the one change allowed.
_USERINFO = re.compile(r"(://[^/\s:@\"']*:)[^\s/\"']+(@)")


def _sources() -> list[Path]:
    files = []
    for name in ("attr", "structlog", "click", "jinja2", "httpx2", "cattrs"):
        module = importlib.import_module(name)
        files += sorted(Path(str(module.__file__)).parent.rglob("*.py"))
    for package in ("pipeline", "effects", "stages"):
        files += sorted((ROOT / package).rglob("*.py"))
    # gitleaks' configuration as a Python table is data, not code: the patterns of secrets and
    # the published keys its allow-lists name (the same as gitleaks.toml, which is no source).
    return [f for f in files if f != ROOT / "stages" / "log" / "gitleaks" / "table.py"]


def test_ordinary_source_passes_unchanged() -> None:
    files = _sources()
    assert len(files) >= 300
    damaged = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        out = redact(text)
        if out != text and out != _USERINFO.sub(r"\1***\2", text):
            damaged += [(path.name, a, b) for a, b in zip(text.splitlines(), out.splitlines(),
                                                          strict=True) if a != b]
    assert not damaged, damaged[:20]


@pytest.mark.parametrize(("text", "secret"), [
    ("aws configure set aws_secret_access_key 9drTJvcXLB89ZZZPLELB8923FB892xMFI+/ab12",
     "9drTJvcXLB89ZZZPLELB8923FB892xMFI"),
    ("aws configure set profile.dev.aws_session_token IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3Q",
     "IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3Q"),
    ('{\n    "Credentials": {\n        "AccessKeyId": "ASIAY34FZKBOKMUTVV7A",\n'
     '        "SecretAccessKey": "9drTJvcXLB89ZZZPLELB8923FB892xMFI+/ab12",\n'
     '        "SessionToken": "IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3QtMSJGMEQCIA+abc/def=="\n    }\n}',
     "9drTJvcXLB89ZZZPLELB8923FB892xMFI"),
    ('{"SessionToken": "IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3QtMSJGMEQCIA+abc/def=="}',
     "IQoJb3JpZ2luX2VjEHoaCXVzLWVhc3Q"),
    ("https://acct.blob.core.windows.net/c/f?sv=2021-06-08&sr=b&sp=r"
     "&sig=Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA%3D", "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature="
     "fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024", "fe5f80f77d5fa3beca"),
    ("export AZURE_DEVOPS_EXT_PAT=q8Zk2mXr7TpLw3Nv9Yb4Hc6Jd1Fs5Ga0Qe2Rt8Uy7Io3Pa4Sd6Fg",
     "q8Zk2mXr7TpLw3Nv9Yb4Hc6Jd1Fs5Ga0Qe2Rt8Uy7Io3Pa4Sd6Fg"),
    ("az storage blob upload --account-key Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA== -f x",
     "Zm9vYmFyYmF6cXV4cXV1eDEyMzQ1Njc4OTA"),
    ('HTTP 400: {"error": {"message": "Invalid request: {\\"aws_secret_access_key\\": '
     '\\"9drTJvcXLB89ZZZPLELB8923FB892xMFI+/ab12\\"}"}}', "9drTJvcXLB89ZZZPLELB8923FB892xMFI"),
])
def test_cloud_commands_their_outputs_and_signed_urls_hide_their_secrets(
        text: str, secret: str) -> None:
    assert secret not in redact(text)


@pytest.mark.parametrize("text", [
    "tokenizer = AutoTokenizer.from_pretrained(name)",
    "ids = tokenizer.encode(text)",
    "Author: Dana Smith",
    "token = await getToken()",
    "const token = await getToken();",
    "secret_length = X25519.secret_length",
    '{"tokenizer": "gpt2", "author": "Dana Smith", "max_tokens": 512}',
    "PATH=/usr/bin:/bin",
    "git log --author=dana --password-file=PASSWORD_FILE",
    "password = self.password",
    "auth: AuthTypes | None = None,",
    "return BasicAuth(username=username, password=password)",
    'api_key_env = "OPENAI_API_KEY"',
    "Authorization: Bearer YOUR_TOKEN",
    "HTTP 401: invalid_api_key: Incorrect API key provided",
])
def test_ordinary_identifiers_stay(text: str) -> None:
    assert redact(text) == text
