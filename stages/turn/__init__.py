"""The turn as a machine: the generator that orders one user turn, and the stages it asks, call by
call."""
