"""The one error type of the scheduling library for descriptions it cannot use."""

from __future__ import annotations


class SchedulingError(ValueError):
    """A cluster, model, workload or plan the scheduler cannot use; `str()` is one line naming the field."""
