"""The imperative shell: the interpreter of the turn and session machines, journals, replay and
fork."""
