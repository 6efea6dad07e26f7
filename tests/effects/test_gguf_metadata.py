"""The GGUF metadata reader against llama.cpp's own ``gguf`` package: what its writer wrote is
read back, and (slow lane: its reader takes some seconds) the embedded model's tokenizer
metadata reads the same as with its reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFReader, GGUFWriter

from effects.providers.gguf_metadata import read_metadata

VALUES = {"tokenizer.ggml.tokens": ["<|im_start|>", "Ġhello", "ünï", ""],
          "tokenizer.ggml.token_type": [3, 1, 1, 1],
          "tokenizer.ggml.scores": [0.5, -1.25, 0.0, 2.0],
          "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.add_bos_token": False,
          "tokenizer.chat_template": "{{ messages }}", "general.size": -7,
          "general.ratio": 0.25}


def _written(path: Path) -> Path:
    writer = GGUFWriter(path, "llama")
    writer.add_array("tokenizer.ggml.tokens", VALUES["tokenizer.ggml.tokens"])
    writer.add_array("tokenizer.ggml.token_type", VALUES["tokenizer.ggml.token_type"])
    writer.add_array("tokenizer.ggml.scores", VALUES["tokenizer.ggml.scores"])
    writer.add_uint32("tokenizer.ggml.bos_token_id", 1)
    writer.add_bool("tokenizer.ggml.add_bos_token", False)
    writer.add_string("tokenizer.chat_template", "{{ messages }}")
    writer.add_int64("general.size", -7)
    writer.add_float64("general.ratio", 0.25)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_what_ggufs_writer_wrote_reads_back(tmp_path):
    path = _written(tmp_path / "tiny.gguf")
    assert read_metadata(path, lambda key: key in VALUES) == VALUES
    assert read_metadata(path, {"general.architecture"}) == {"general.architecture": "llama"}


def test_a_file_that_is_not_gguf_or_is_cut_short_is_a_value_error(tmp_path):
    other = tmp_path / "model.gguf"
    other.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(ValueError, match="not a GGUF file"):
        read_metadata(other, set())
    whole = _written(tmp_path / "tiny.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(whole[:60])
    with pytest.raises(ValueError, match="ends inside its metadata"):
        read_metadata(cut, set())


def test_the_embedded_models_tokenizer_reads_as_with_ggufs_reader():
    from effects.local.model_file import default_model

    path = default_model()
    ours = read_metadata(path, lambda key: key.startswith("tokenizer."))
    theirs = {key: field.contents() for key, field in GGUFReader(str(path)).fields.items()
              if key.startswith("tokenizer.")}
    assert ours == theirs and len(ours["tokenizer.ggml.tokens"]) == 49152
