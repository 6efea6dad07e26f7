"""The event log on disk: the codec, the envelope and the append-only store."""
