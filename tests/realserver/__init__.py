"""The real-server lane: mibyan's three adapters against llama.cpp's own server (xllamacpp)."""
