"""The distributed pipeline: one process per stage over ZeroMQ, the first stage scheduling for all."""
