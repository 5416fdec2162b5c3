"""batchmarket client SDK: the protocol (types, signing, Merkle trees), contract bindings and CLIs."""
