"""Hypothesis profiles. The default one is derandomized: every run tries the same examples, so
the suite (and CI) passes or fails the same way each time. ``HYPOTHESIS_PROFILE=explore`` draws
fresh random examples, to hunt for new failures; pin each one it finds with
``@example``."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
