"""The coordinator: deploys and operates the market.

The API, scheduling and settlement arrive in later issues."""
