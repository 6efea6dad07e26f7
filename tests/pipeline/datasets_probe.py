"""Run by another ``datasets`` than the project's (``uv run --with datasets==X --isolated``):
loads each export file given as an argument and prints, as one JSON line, the rows as that
``datasets`` gives them back (or the error it raised)."""

import json
import sys
import tempfile

import datasets

out = {"version": datasets.__version__, "files": {}}
with tempfile.TemporaryDirectory() as cache:
    for path in sys.argv[1:]:
        loader = "parquet" if path.endswith(".parquet") else "json"
        try:
            data = datasets.load_dataset(loader, data_files=path, split="train", cache_dir=cache)
            out["files"][path] = {"rows": data.to_list()}
        except Exception as exc:  # the probe reports what this version does, whatever it is
            out["files"][path] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
print(json.dumps(out, default=str))
