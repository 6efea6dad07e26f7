"""The embedded local model: which GGUF file it serves and llama.cpp's server that serves it."""
