"""`miner serve`: profile the device, join a coordinator, serve work units, sign the results."""
