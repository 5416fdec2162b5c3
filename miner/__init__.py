"""The miner: its on-chain registration today; model shards and the pipeline stage engine later."""
