"""mibyan pipeline."""
