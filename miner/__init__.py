"""The miner: model shards and the stage engine, the multi-process pipeline over ZeroMQ (and the relay for
stages behind NAT), the node that serves a coordinator's work units and signs their results, the verifier that
re-scores claimed outputs, and the `miner` and `arbitration` command lines (miner/cli/)."""
