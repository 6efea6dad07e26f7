"""A scorer for ``py:tests.pipeline.eval_scorer:length_ok`` (imported by name, as a user's)."""

from pipeline.eval import Sample


def length_ok(sample: Sample) -> float | None:
    return None if sample.answer is None else float(len(sample.answer) <= 8)
