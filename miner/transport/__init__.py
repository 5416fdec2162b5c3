"""Stage-to-stage transport: ZeroMQ sockets carrying a msgpack header and raw tensor bytes (never pickle),
CURVE-authenticated, and a relay with end-to-end seals for stages behind NAT."""
