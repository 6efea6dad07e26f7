"""The built-in tools and the runner that executes validated calls."""
