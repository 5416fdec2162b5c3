"""A deterministic discrete-event simulation of a cluster serving an offline batch under a plan."""
