"""Stage-to-stage transport: ZeroMQ sockets carrying a msgpack header and raw tensor bytes. Never pickle."""
