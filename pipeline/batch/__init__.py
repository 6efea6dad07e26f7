"""Batch generation: one session per prompt, locally or on Ray, then an export."""
