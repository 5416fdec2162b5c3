"""The coordinator's HTTP API (FastAPI): OpenAI-shaped files and batches, miner endpoints, health, metrics."""
