"""Opening a JSON-RPC connection with a clear error when the endpoint does not answer."""

from __future__ import annotations

from web3 import Web3

from client_sdk.errors import ChainError


def open_rpc(rpc_url: str) -> tuple[Web3, int]:
    """A Web3 on `rpc_url` and the chain id it reports; ChainError if it does not answer."""
    w3 = Web3(Web3.HTTPProvider(rpc_url, request_kwargs={"timeout": 30}))
    try:
        chain_id = w3.eth.chain_id
    except Exception as exc:  # connection refused, DNS failure, timeout, not JSON-RPC...
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise ChainError(f"cannot reach the RPC at {rpc_url}: {reason}") from None
    return w3, chain_id
