"""The market explorer: read-only HTML pages served by the coordinator at /explorer (the market, a batch's
progress, an on-chain task, disputes and audits, verifiers), each with a JSON twin its page script polls to
keep the figures live. It adds no write path and serves no batch content (docs/explorer.md, and
docs/security.md)."""
