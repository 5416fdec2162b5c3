"""A local anvil devnet on a free port, for tests and the demo."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from types import TracebackType

from eth_account import Account
from eth_account.signers.local import LocalAccount
from web3 import Web3

from client_sdk.chain.toolchain import foundry_binary
from client_sdk.errors import ChainError
from client_sdk.processes import stop_process

# Anvil's well-known development mnemonic; its accounts are funded with ether at genesis.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
DEV_ACCOUNT_COUNT = 10


# Ports free_port has given out in this process: until its server binds one, the OS may offer it again (a
# local system once gave a miner's stage endpoint the port its coordinator API was about to listen on).
_GIVEN: set[int] = set()
_GIVING = threading.Lock()
PORT_TRIES = 1_000


def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it), never one this process was given before."""
    with _GIVING:
        for _ in range(PORT_TRIES):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port: int = sock.getsockname()[1]
            if port not in _GIVEN:
                _GIVEN.add(port)
                return port
    raise RuntimeError(f"the OS offered only ports this process was already given, {PORT_TRIES} times")


def dev_accounts(count: int = DEV_ACCOUNT_COUNT) -> list[LocalAccount]:
    """Anvil's funded development accounts, in anvil's order."""
    Account.enable_unaudited_hdwallet_features()
    return [Account.from_mnemonic(DEV_MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(count)]


class Anvil:
    """Starts anvil on a free port, waits until it answers, and stops it on exit.

    >>> with Anvil() as node:
    ...     node.w3.eth.chain_id
    """

    def __init__(
        self, chain_id: int = 31337, startup_timeout: float = 20.0, block_time_s: int | None = None
    ) -> None:
        """`block_time_s`: also mine a block every so many seconds besides one per transaction, so that the
        chain moves on by itself like a live one (random audits seal from the block after their draw)."""
        self.chain_id = chain_id
        self.startup_timeout = startup_timeout
        self.block_time_s = block_time_s
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def w3(self) -> Web3:
        return Web3(Web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": 30}))

    def start(self) -> Anvil:
        for _attempt in range(3):  # another process may grab the port between choosing and binding it
            self.port = free_port()
            self._process = subprocess.Popen(
                [
                    foundry_binary("anvil"),
                    "--port",
                    str(self.port),
                    "--chain-id",
                    str(self.chain_id),
                    "--accounts",
                    str(DEV_ACCOUNT_COUNT),
                    "--silent",
                    *(
                        ["--block-time", str(self.block_time_s), "--mixed-mining"]
                        if self.block_time_s
                        else []
                    ),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._wait_ready():
                return self
            self.stop()
        raise ChainError("anvil did not start")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.startup_timeout
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return False
            try:
                if self.w3.eth.chain_id == self.chain_id:
                    return True
            except Exception:  # not listening yet
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self._process is None:
            return
        stop_process(self._process, grace_s=5)
        self._process = None

    def advance_time(self, seconds: int) -> None:
        """Moves the chain clock forward and mines a block (devnet only)."""
        provider = self.w3.provider
        provider.make_request("evm_increaseTime", [seconds])  # type: ignore[arg-type]
        provider.make_request("evm_mine", [])  # type: ignore[arg-type]

    def __enter__(self) -> Anvil:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
