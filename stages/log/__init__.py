"""What a session is made of: the event types, the state they fold into, the fold, and the
upcasters that keep old logs readable."""
