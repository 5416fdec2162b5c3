"""The coordinator: deploys the contracts, serves the OpenAI-shaped API, plans pipelines over the live miners,
routes work units, collects the miners' signatures and settles batches on-chain (API processes and Celery
workers over one database and one Redis)."""
