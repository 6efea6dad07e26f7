"""Trajectories read back from the logs and exported as training data."""
