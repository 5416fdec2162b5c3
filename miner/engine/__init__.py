"""The stage engine: sequences, a continuous-batching scheduler with chunked prefill, sampling, the loop."""
