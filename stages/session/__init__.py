"""The session as a machine: start or resume, then turns, compressions and fork switches, until
it splits or ends."""
