"""The choices of ``mibyan export`` and ``mibyan batch``, kept apart so that the command line
can offer them without importing the exporter."""

from __future__ import annotations

FORMAT_NAMES = ("sharegpt", "openai", "trl", "atropos", "trl-tokens")
OUTPUT_NAMES = ("jsonl", "parquet")
LINEAGE_NAMES = ("stitched", "segments")
PROVENANCE_NAMES = ("inline", "sidecar", "none")
