"""Everything that talks to the chain: anvil, deployment files, transactions and contract bindings."""
