"""The miner: its on-chain registration and stake (`miner` CLI), model shards and the stage engine, the
multi-process pipeline over ZeroMQ, the node that serves a coordinator's work units and signs their results,
and the verifier that re-scores claimed outputs."""
