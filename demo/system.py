"""The whole market on one machine: anvil with the contracts, Redis, a database, the coordinator API and a
Celery worker as processes, and N miner nodes serving a tiny checkpoint, each as its own `miner serve`.

The end-to-end tests, the demo and the end-to-end benchmark all run on this, so what they exercise is what an
operator runs by hand (see the README), only on localhost.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import sqlalchemy as sa
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak

from client_sdk.chain.anvil import Anvil, dev_accounts, free_port
from client_sdk.chain.contracts import Market, connect
from client_sdk.chain.deploy import DeployParams, deploy
from client_sdk.chain.types import MinerProfile
from client_sdk.client import Client
from client_sdk.encoding import short_string
from client_sdk.keys import SIGNER_KEY_ENV
from client_sdk.processes import stop_process
from client_sdk.protocol.model_identity import served_model_hash
from coordinator.db.migrate import upgrade
from coordinator.db.models import Miner
from coordinator.scheduling.cluster import GIB
from coordinator.scheduling.model import DEFAULT_KV_RESERVE, ModelSpec
from demo.launcher import LaunchedProcess, launch
from demo.services import PostgresServer, RedisServer, running_postgres, running_redis
from miner.pipeline import flood
from miner.pipeline.processes import stage_threads
from miner.tiny_checkpoint import build_tiny_model
from miner.transport.security import LinkKeys

UNIT = 10**6  # one token in base units
LENT_CPU_NICENESS = 10  # miners' and verifiers' CPU priority below the coordinator's (see LocalSystem._spawn)


@dataclass(frozen=True)
class SystemConfig:
    miners: int = 2
    stages: int = 1  # each miner lends memory for 1/stages of the model: pipelines of `stages` miners
    model: str = "tiny/qwen3"
    model_dir: Path | None = (
        None  # the checkpoint served as `model`; None: a tiny random one, made in workdir
    )
    min_stake: int = 100 * UNIT
    miner_stake: int = 200 * UNIT
    min_stake_lock: int = 10 * UNIT
    user_funds: int = 1_000 * UNIT
    challenge_window: int = 600
    fee_bps: int = 500
    price_per_million_tokens: int = 20 * UNIT
    region: str = "us-east-1"
    sweep_s: float = 0.5
    heartbeat_s: float = 1.0
    work_unit_size: int = 64
    work_lease_s: int = 60
    heartbeat_ttl_s: int = 30
    database_url: str | None = None  # default: SQLite in the work directory, or a server of `database`
    database: str = "sqlite"  # "postgresql": a PostgreSQL server of this system's own, which can be crashed
    verifiers: int = 0  # `arbitration verify` processes, each staking verifier_stake
    # verifiers of another model (a tiny checkpoint of other weights, so another model hash): juries are drawn
    # per model, so they never sit on a dispute of this system's model
    other_model_verifiers: int = 0
    verifier_stake: int = 100 * UNIT
    audit_pool: int = 50 * UNIT  # funded by the admin when there are verifiers
    audit_rate_bps: int | None = None  # None: the deploy script's default
    timelock_delay: int | None = None  # seconds admin changes wait; None: the deploy script's default
    faulty_miner: str | None = None  # BATCHMARKET_TEST_CORRUPT for miner0, e.g. "substitute:0.5"
    # BATCHMARKET_TEST_FLOOD for every miner: as a first stage, each SIGUSR1 makes it flood the next stage
    # with this many requests it never finishes (miner.pipeline.flood; the fault matrix's hostile peer)
    flooding_heads: int | None = None
    # HTTP workers of the API: one, as the tests' machine also runs the miners and their polling is light
    api_workers: int = 1
    # torch threads of each miner; None: the machine's cores split between them
    miner_threads: int | None = None
    # miners behind NAT (by index): each registers an endpoint where nothing listens, binds its stage inbox
    # where no peer is told, and takes its peers' messages through the coordinator's relay (`coordinator
    # relay`, started when any miner is behind it)
    relayed_miners: tuple[int, ...] = ()
    # each miner's node consents and signs with a key of its own (`miner serve` reads it from
    # BATCHMARKET_SIGNER_PRIVATE_KEY), registered as its signer, apart from its account
    separate_signers: bool = False


def lent_memory_gb(model_dir: Path, stages: int) -> float:
    """Memory a miner lends so that the planner needs `stages` of them for one pipeline: its share of the
    model's layer units, one unit of slack (and half of one against rounding), and the planner's KV-cache
    reserve on top."""
    spec = ModelSpec.from_hf_config(json.loads((model_dir / "config.json").read_text()))
    units = -(-spec.units_needed // stages) + 1.5
    return units * spec.layer_bytes / (1 - DEFAULT_KV_RESERVE) / GIB


class LocalSystem:
    """Context manager; accounts: 0 admin, 1 coordinator, 2 user, 3.. miners, then verifiers, then verifiers
    of the other model."""

    def __init__(self, workdir: Path, config: SystemConfig = SystemConfig()) -> None:
        self.workdir = workdir
        self.config = config
        accounts = dev_accounts()
        self.admin, self.coordinator, self.user = accounts[0], accounts[1], accounts[2]
        self.miner_accounts: list[LocalAccount] = accounts[3 : 3 + config.miners]
        first_verifier = 3 + config.miners
        self.verifier_accounts: list[LocalAccount] = accounts[
            first_verifier : first_verifier + config.verifiers
        ]
        first_other = first_verifier + config.verifiers
        self.other_verifier_accounts: list[LocalAccount] = accounts[
            first_other : first_other + config.other_model_verifiers
        ]
        self.other_model_dir = workdir / "other-model"
        self.deployment_file = workdir / "deployment.json"
        self.model_dir = config.model_dir or workdir / "model"
        self.database_url = config.database_url or f"sqlite:///{workdir / 'coordinator.db'}"
        self.redis: RedisServer | None = None
        self.postgres: PostgresServer | None = None
        self.api_url = f"http://127.0.0.1:{free_port()}"
        self.processes: dict[str, LaunchedProcess] = {}
        self._miner_started_at: dict[int, int] = {}  # wall-clock seconds of each miner's latest start
        self._stack = contextlib.ExitStack()

    # -- lifecycle
    def __enter__(self) -> LocalSystem:
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        """Starts every part, what does not depend on another side by side: the contracts deploy (a forge
        script, its own process) while Redis, the database and the model are made; the miners start (and
        import their model code) while the API comes up, and join once it answers."""
        config = self.config
        self.anvil = self._stack.enter_context(Anvil(block_time_s=1 if config.verifiers else None))
        with ThreadPoolExecutor(max_workers=1) as pool:
            deployed = pool.submit(self._deploy)
            self.redis = self._stack.enter_context(running_redis())
            self.redis_url = self.redis.url
            if config.database == "postgresql" and config.database_url is None:
                self.postgres = self._stack.enter_context(running_postgres())
                self.database_url = self.postgres.url
            upgrade(self.database_url)
            if config.model_dir is None and not (self.model_dir / "config.json").is_file():
                build_tiny_model(self.model_dir)
            if self.other_verifier_accounts:
                build_tiny_model(self.other_model_dir, seed=1)
            self.market = deployed.result()
        self.market.token.mint(self.user.address, config.user_funds)
        for miner in self.miner_accounts:
            self.register(miner)
        self.start_api(wait=False)
        self.start_worker()
        if config.relayed_miners:
            self.wait_for_api()
            self.start_relay()
        for index in range(len(self.miner_accounts)):
            self.start_miner(index)
        self.wait_for_api()
        self.wait_for_miners(range(len(self.miner_accounts)))
        if self.verifier_accounts:
            self._fund_audit_pool()
        for index in range(len(self.verifier_accounts)):
            self.start_verifier(index)
        for index in range(len(self.other_verifier_accounts)):
            self.start_verifier(index, other_model=True)
        self.wait_for_verifiers()

    def _deploy(self) -> Market:
        """The contracts, deployed by the admin with this system's parameters."""
        config = self.config
        deploy(
            self.anvil.rpc_url,
            "0x" + self.admin.key.hex(),
            self.deployment_file,
            DeployParams(
                coordinator=self.coordinator.address,
                min_stake=config.min_stake,
                min_stake_lock=config.min_stake_lock,
                challenge_window=config.challenge_window,
                coordinator_fee_bps=config.fee_bps,
                audit_rate_bps=config.audit_rate_bps,
                timelock_delay=config.timelock_delay,
            ),
        )
        return connect(self.anvil.rpc_url, self.deployment_file, self.admin)

    def __exit__(self, *_exc: object) -> None:
        for process in self.processes.values():  # all asked at once: they shut down side by side
            if process.poll() is None:
                process.terminate()
        for name in list(self.processes):
            self.stop(name)
        self._stack.close()

    # -- parties
    def register(self, miner: LocalAccount) -> str:
        """Registers `miner` on-chain for this system's model with its stake (minted to it; it pays its own
        gas) and a local endpoint, which it returns."""
        config = self.config
        self.market.token.mint(miner.address, config.miner_stake)
        as_miner = self.market.as_account(miner)
        as_miner.token.approve(as_miner.registry.address, config.miner_stake)
        profile = MinerProfile(
            signer=self.signer_of(miner).address,
            gpu_class=short_string("cpu"),
            vram_gb=1,
            gpu_count=1,
            region=short_string(config.region),
            price_floor=0,
            endpoint=f"tcp://127.0.0.1:{free_port()}",
            model_ids=(served_model_hash(self.model_dir),),
        )
        as_miner.registry.register(profile, config.miner_stake)
        return profile.endpoint

    def signer_of(self, miner: LocalAccount) -> LocalAccount:
        """The key `miner` registers as its signer: its account, or with `separate_signers` one derived from
        it (the same at every start)."""
        if not self.config.separate_signers:
            return miner
        derived: LocalAccount = Account.from_key(keccak(b"batchmarket demo signer" + miner.key))
        return derived

    def _fund_audit_pool(self) -> None:
        self.market.token.mint(self.admin.address, self.config.audit_pool)
        self.market.token.approve(self.market.escrow.address, self.config.audit_pool)
        self.market.audits.fund_audit_pool(self.config.audit_pool)

    def client(self, account: LocalAccount | None = None) -> Client:
        return Client(
            self.api_url,
            key=account or self.user,
            rpc_url=self.anvil.rpc_url,
            deployment=self.deployment_file,
        )

    def market_as(self, account: LocalAccount) -> Market:
        return self.market.as_account(account)

    # -- processes
    def environment(self, key: LocalAccount | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "BATCHMARKET_DATABASE_URL": self.database_url,
                "BATCHMARKET_REDIS_URL": self.redis_url,
                "BATCHMARKET_MODELS": f'{{"{self.config.model}": "{self.model_dir}"}}',
                "BATCHMARKET_RPC_URL": self.anvil.rpc_url,
                "BATCHMARKET_DEPLOYMENT": str(self.deployment_file),
                "BATCHMARKET_PRICE_PER_MILLION_TOKENS": str(self.config.price_per_million_tokens),
                "BATCHMARKET_BEAT_SCHEDULE": str(self.workdir / "celerybeat-schedule"),
                "BATCHMARKET_WORK_UNIT_SIZE": str(self.config.work_unit_size),
                "BATCHMARKET_WORK_LEASE_S": str(self.config.work_lease_s),
                "BATCHMARKET_HEARTBEAT_TTL_S": str(self.config.heartbeat_ttl_s),
            }
        )
        env.pop(SIGNER_KEY_ENV, None)  # a miner signs with a key of its own only where start_miner gives one
        if key is not None:
            env["BATCHMARKET_PRIVATE_KEY"] = "0x" + key.key.hex()
        return env

    def _spawn(
        self,
        name: str,
        args: list[str],
        key: LocalAccount | None = None,
        extra: dict[str, str] | None = None,
        lends_cpu: bool = False,
    ) -> None:
        """Starts `python -m args` logging to `name`.log, in its own session (stopping it also stops what it
        started: Celery's pool processes), from the launcher's fork server. `lends_cpu`: a miner or verifier,
        run at a lower CPU priority, as a machine lent to the market gives way to its owner's work: here, the
        coordinator's, which shares these cores and must stay responsive while they compute."""
        environment = self.environment(key) | (extra or {})
        niceness = LENT_CPU_NICENESS if lends_cpu else 0
        self.processes[name] = launch(args[0], args[1:], environment, self.workdir / f"{name}.log", niceness)

    def start_api(self, wait: bool = True) -> None:
        """Starts the API; `wait`: until it answers its health check."""
        port = self.api_url.rsplit(":", 1)[1]
        workers = str(self.config.api_workers)
        self._spawn("api", ["coordinator", "serve", "--port", port, "--workers", workers])
        if wait:
            self.wait_for_api()

    def wait_for_api(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive("api")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.api_url}/healthz", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the API did not come up; see {self.workdir / 'api.log'}")

    def start_worker(self) -> None:
        args = ["coordinator", "worker", "--concurrency", "1", "--sweep-s", str(self.config.sweep_s)]
        self._spawn("worker", args, self.coordinator)

    def start_relay(self) -> None:
        """The coordinator operator's relay, on a free local port, with its key made here first (so the
        relayed miners can be told it)."""
        key_file = self.workdir / "relay.key"
        self.relay_key = LinkKeys.load_or_create(key_file).public.decode()
        self.relay_endpoint = f"tcp://127.0.0.1:{free_port()}"
        args = ["coordinator", "relay", "--listen", self.relay_endpoint, "--key-file", str(key_file)]
        args += ["--coordinator", self.api_url]
        self._spawn("relay", args)

    def start_miner(self, index: int) -> None:
        args = [
            "miner", "serve",
            "--coordinator", self.api_url,
            "--model", self.config.model,
            "--model-dir", str(self.model_dir),
            "--memory-gb", str(lent_memory_gb(self.model_dir, self.config.stages)),
            "--heartbeat-s", str(self.config.heartbeat_s),
            "--threads", str(self.config.miner_threads or stage_threads(self.config.miners)),
            "--rpc-url", self.anvil.rpc_url,
            "--deployment", str(self.deployment_file),
            "--state-dir", str(self.workdir / f"miner{index}-state"),
        ]  # fmt: skip
        if index in self.config.relayed_miners:
            args += ["--relay", self.relay_endpoint, "--relay-key", self.relay_key]
        extra = (
            {"BATCHMARKET_TEST_CORRUPT": self.config.faulty_miner}
            if index == 0 and self.config.faulty_miner
            else {}
        )
        if self.config.flooding_heads:
            extra[flood.ENV] = str(self.config.flooding_heads)
        account = self.miner_accounts[index]
        if self.config.separate_signers:
            extra[SIGNER_KEY_ENV] = "0x" + self.signer_of(account).key.hex()
        self._miner_started_at[index] = int(time.time())
        self._spawn(f"miner{index}", args, account, extra, lends_cpu=True)

    def start_verifier(self, index: int, other_model: bool = False) -> None:
        """`arbitration verify` with its own key, of this system's model or the other one; it stakes and
        registers itself."""
        account = (self.other_verifier_accounts if other_model else self.verifier_accounts)[index]
        self.market.token.mint(account.address, self.config.verifier_stake)
        args = [
            "miner.cli.arbitration", "verify",
            "--model-dir", str(self.other_model_dir if other_model else self.model_dir),
            "--coordinator", self.api_url,
            "--poll-s", "0.5",
            "--rpc-url", self.anvil.rpc_url,
            "--deployment", str(self.deployment_file),
        ]  # fmt: skip
        self._spawn(f"{'other-' if other_model else ''}verifier{index}", args, account, lends_cpu=True)

    def wait_for_miners(self, indices: Iterable[int], timeout: float = 120.0) -> None:
        """Until each of these miners has joined the coordinator since it was last started: a batch submitted
        before a (re)started miner is in is planned and assigned without it (only the miners assigned
        on-chain can serve a task)."""
        indices = list(indices)
        wanted = {self.miner_accounts[i].address: self._miner_started_at[i] for i in indices}
        query = sa.select(Miner.address, Miner.session_started_at).where(Miner.address.in_(list(wanted)))
        engine = sa.create_engine(self.database_url)

        def joined() -> bool:
            with engine.connect() as connection:
                sessions = dict(connection.execute(query).all())
            return all((sessions.get(a) or 0) >= since for a, since in wanted.items())

        failure = f"miners {sorted(wanted)} did not join within {timeout} s"
        try:
            self._wait_until(joined, [f"miner{i}" for i in indices], failure, timeout)
        finally:
            engine.dispose()

    def wait_for_verifiers(self, timeout: float = 120.0) -> None:
        """Until every verifier has staked and registered on-chain: a dispute opened before would draw its
        jury from the verifiers registered by then."""
        self._wait_until(
            lambda: all(
                self.market.verifiers.is_verifier(v.address)
                for v in self.verifier_accounts + self.other_verifier_accounts
            ),
            [f"verifier{i}" for i in range(len(self.verifier_accounts))]
            + [f"other-verifier{i}" for i in range(len(self.other_verifier_accounts))],
            f"the verifiers did not all register within {timeout} s",
            timeout,
        )

    def _wait_until(self, done: Callable[[], bool], alive: list[str], failure: str, timeout: float) -> None:
        """Polls `done` until it holds; RuntimeError(`failure`) after `timeout` seconds, or at once with the
        log to read if one of the processes named in `alive` exited meanwhile."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            for name in alive:
                self._check_alive(name)
            time.sleep(0.2)
        raise RuntimeError(failure)

    def _check_alive(self, name: str) -> None:
        process = self.processes[name]
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}; see {self.workdir / f'{name}.log'}")

    def stop(self, name: str, kill: bool = False) -> None:
        """Stops the process and everything in its process group (a killed Celery worker's pool processes
        would otherwise live on as orphans)."""
        process = self.processes.pop(name, None)
        if process is None:
            return
        if kill:
            process.kill()
        stop_process(process, grace_s=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # what it left behind

    def crash_redis(self, down_s: float = 0.0) -> None:
        """Redis killed (SIGKILL) and, after `down_s`, started again on its port and data."""
        assert self.redis is not None
        self.redis.kill()
        time.sleep(down_s)
        self.redis.start()

    def crash_database(self, down_s: float = 0.0) -> None:
        """The system's own PostgreSQL killed (SIGKILL) and, after `down_s`, started again: it recovers what
        was committed from its write-ahead log."""
        assert self.postgres is not None, "only a system started with database='postgresql' owns its server"
        self.postgres.kill()
        time.sleep(down_s)
        self.postgres.start()

    def advance_chain_time(self, seconds: int) -> None:
        self.anvil.advance_time(seconds)
