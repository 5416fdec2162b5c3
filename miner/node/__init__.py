"""The miner node behind `miner serve`: profile the device, join a coordinator, host the assigned stage, serve
work units as head, journal what it served, and check and sign the results."""
