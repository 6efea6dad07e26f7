"""Tool calls: the specs the model sees, the plan that validates and repairs calls, dangerous
commands."""
