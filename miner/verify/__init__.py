"""Verification of claimed outputs: re-scoring with the reference model, the pass/fail policy, and the
corruptions a faulty miner makes (for tests and the error-rate benchmark)."""
