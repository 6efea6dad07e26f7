"""mibyan stages."""
