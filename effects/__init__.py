"""mibyan effects."""
