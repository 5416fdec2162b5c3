"""The miner's command lines: `miner` (app.py: register, stake, status, run-local; serve.py: `miner serve`;
relay.py: `miner relay`, also `coordinator relay`) and `arbitration` (arbitration.py, with the verifier daemon
`arbitration verify` in verify.py)."""
