"""Pure scheduling algorithms: model allocation, routing, membership, microbatches, latency scheduling."""
