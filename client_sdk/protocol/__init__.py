"""What the parties exchange, defined once: constants every party shares and the HTTP error envelope. (Result
leaves, trees and commitments live in client_sdk.results and client_sdk.eip712, documented with the rest in
docs/protocol.md.)"""
