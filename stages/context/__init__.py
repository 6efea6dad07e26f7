"""Context management: the window, the token estimate, and compression (plan, summary, apply)."""
