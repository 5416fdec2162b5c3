"""What the parties exchange, defined once: constants every party shares, the HTTP error envelope, how a
payment is split (the coordinator computes it, every miner checks it), model identity, sampling rules, stage
endpoints and the probe of one, link keys, and the on-chain task as every party reads it. (Result leaves,
trees and commitments live in client_sdk.results and client_sdk.eip712, documented with the rest in
docs/protocol.md.)"""
