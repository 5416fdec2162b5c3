"""`miner serve`: the node's command line (registered in miner.cli.app)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import torch
import typer
from eth_account.signers.local import LocalAccount

from client_sdk.cli.support import (
    DEFAULT_COORDINATOR,
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    CoordinatorOption,
    DeploymentOption,
    DeviceOption,
    DtypeOption,
    KeystoreOption,
    ModelDirOption,
    RpcUrlOption,
    ask_password,
    console,
    log_to_console,
    open_market,
)
from client_sdk.encoding import read_short_string
from client_sdk.errors import UserError
from client_sdk.keys import SIGNER_KEY_ENV, SIGNER_KEYSTORE_PASSWORD_ENV, key_from_environment, load_account
from client_sdk.protocol.endpoint import check_stage_endpoint
from client_sdk.protocol.link_keys import is_link_key
from client_sdk.protocol.model_identity import describe, model_hash
from client_sdk.units import parse_amount
from miner.model.config import ModelConfig
from miner.model.dtypes import dtype_named
from miner.node.appeals import Appealer
from miner.node.challenges import Answerer
from miner.node.consent import Consenter
from miner.node.coordinator_client import CoordinatorClient
from miner.node.executor import HeadExecutor
from miner.node.journal import Journal
from miner.node.profile import profile
from miner.node.requests import Reader
from miner.node.serve import Node, NodeConfig, NodeRelay
from miner.node.stage_host import HostSettings
from miner.node.vouch import Voucher
from miner.pipeline import flood
from miner.pipeline.batch import load_tokenizer, stop_token_ids
from miner.pipeline.stage import CacheSettings
from miner.transport.relay import RelayAddress
from miner.transport.security import LinkKeys
from miner.verify import corrupt

BEHIND_RELAY = "tcp://127.0.0.1:*"  # where a relayed node's inbox binds: only its own driver dials it
KV_PAGES = 512  # per microbatch, 16 tokens each
MAX_BATCH_SIZE = 32  # sequences per microbatch


def serve(
    model: Annotated[str, typer.Option(help="Model name as requests name it (and as registered on-chain).")],
    model_dir: ModelDirOption,
    coordinator: CoordinatorOption = DEFAULT_COORDINATOR,
    device: DeviceOption = "cpu",
    dtype: DtypeOption = "float32",
    memory_gb: Annotated[
        float | None,
        typer.Option(min=0.001, help="Memory lent to the market (default: all of the device's)."),
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option(
            help="Where this node's stage inbox binds, e.g. tcp://0.0.0.0:5555 behind a forwarded port "
            "(default: the endpoint registered on-chain; with --relay, tcp://127.0.0.1:*, which only this "
            "node dials)."
        ),
    ] = None,
    relay: Annotated[
        str | None,
        typer.Option(
            help="Behind NAT, with no port forwarded: the relay its peers send through, tcp://HOST:PORT "
            "(see `coordinator relay` and `miner relay`).",
            rich_help_panel="Behind NAT",
        ),
    ] = None,
    relay_key: Annotated[
        str | None,
        typer.Option(help="The relay's public key, as it prints it.", rich_help_panel="Behind NAT"),
    ] = None,
    relay_region: Annotated[
        str | None,
        typer.Option(
            help="The relay's region (default: this miner's registered one).", rich_help_panel="Behind NAT"
        ),
    ] = None,
    kv_pages: Annotated[
        int,
        typer.Option(
            min=1,
            help="KV-cache pages of 16 tokens per microbatch while a pipeline keeps one microbatch per "
            "stage (over slow links it keeps more, which split the same memory); every miner of a "
            "pipeline must have at least as many as its head.",
        ),
    ] = KV_PAGES,
    max_batch_size: Annotated[
        int, typer.Option(min=1, help="Sequences per microbatch (as head).")
    ] = MAX_BATCH_SIZE,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="CPU threads the model computes on (default: all cores); give each node its share when "
            "several run on one machine, or they slow each other down.",
        ),
    ] = None,
    heartbeat_s: Annotated[float, typer.Option(min=0.1, help="Seconds between heartbeats.")] = 5.0,
    max_appeal_bond: Annotated[
        str | None,
        typer.Option(
            help="Most this node posts to appeal a conviction over a line it served whole, e.g. 20 "
            "(default: the task's stake lock, which the conviction would take).",
        ),
    ] = None,
    state_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where the node keeps its journal of what it served and its link key (default: "
            "~/.batchmarket/miner-<address>)."
        ),
    ] = None,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
    signer_keystore: Annotated[
        Path | None,
        typer.Option(
            envvar="BATCHMARKET_SIGNER_KEYSTORE",
            help="The keystore of the key that consents to tasks and signs results, where it is not the "
            "miner's account (`miner signer set` registers it; password from "
            f"{SIGNER_KEYSTORE_PASSWORD_ENV} or a prompt). Without it, the key in {SIGNER_KEY_ENV}, else "
            "the account's own. A leaked signer is revoked per task (`miner signer revoke`) while the "
            "account, which holds the stake and sends the transactions, stays safe.",
        ),
    ] = None,
) -> None:
    """Profile the device, join the coordinator, serve the assigned pipeline stage (and, as a pipeline's
    head, its work units), and sign the results after checking them, until Ctrl-C."""
    torch_dtype = dtype_named(dtype)
    through = relay_option(relay, relay_key)
    appeal_bound = None if max_appeal_bond is None else parse_amount(max_appeal_bond)
    market = open_market(rpc_url, deployment, keystore, signing=True)
    assert market.transactor is not None  # signing=True loaded the key
    account = market.transactor.account
    signer = node_signer(signer_keystore, account)
    if not market.registry.is_registered(account.address):
        raise UserError(f"{account.address} is not registered; run `miner register` first")
    registered = market.registry.profile_of(account.address)
    if registered.signer.lower() != signer.address.lower():
        # the contract checks consents and commitments against the registered signer: a node signing with
        # any other key would never be assigned a task
        raise UserError(
            f"this node signs with {signer.address}, but the registered signer is {registered.signer}: "
            f"run `miner signer set {signer.address}`, or give the registered signer's key with "
            "--signer-keystore"
        )
    checkpoint = model_hash(model_dir)
    if checkpoint not in registered.model_ids:
        raise UserError(
            f"the checkpoint in {model_dir} is the model {describe(checkpoint)}, which {account.address} did "
            f"not register (registered: {', '.join(describe(m) for m in registered.model_ids) or 'none'})"
        )
    log_to_console()
    if threads is not None:
        torch.set_num_threads(threads)  # before profiling: the profile measures what will serve
    console.print("profiling the device ...")
    measured = profile(model_dir, torch_dtype, device, memory_gb)
    tokenizer = load_tokenizer(model_dir)
    reader = Reader(tokenizer, ModelConfig.load(model_dir), stop_token_ids(tokenizer, model_dir))
    config = NodeConfig(
        model=model,
        endpoint=registered.endpoint,
        region=read_short_string(registered.region),
        chain_id=market.w3.eth.chain_id,
        task_registry=market.deployment.task_registry,
        heartbeat_s=heartbeat_s,
        relay=(
            NodeRelay(
                through.endpoint, through.key.decode(), relay_region or read_short_string(registered.region)
            )
            if through is not None
            else None
        ),
    )
    client = CoordinatorClient(coordinator, account)
    state = state_dir or Path.home() / ".batchmarket" / f"miner-{account.address}"
    journal = Journal(state / "served.jsonl")
    try:
        link_keys = LinkKeys.load_or_create(state / "link.key")
    except ValueError as exc:
        raise UserError(f"{exc}: move it away and a new link key is made at the next start") from None
    host = HostSettings(
        model_dir,
        listen or (BEHIND_RELAY if through is not None else registered.endpoint),
        CacheSettings(local_pages=kv_pages, max_seqs=max_batch_size),
        torch_dtype,
        device,
        link_keys,
        flood=flood.from_environment(),
    )
    corruption = corrupt.from_environment()
    executor = HeadExecutor(reader, corruption)
    answerer = Answerer(market.challenges, market.tasks, state / "answering")
    # a node made to corrupt lines (the tests' cheating miner) knows its lines are wrong: it never appeals
    appealer = (
        None
        if corruption is not None
        else Appealer(market, answerer, journal, reader.config.num_layers, appeal_bound)
    )
    node = Node(
        config,
        account,
        client,
        measured,
        host,
        executor,
        journal,
        Consenter(signer, account.address, market, checkpoint),
        Voucher(market.tasks, config.chain_id),
        answerer,
        appealer,
        signer,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        node.run(stop)
    except KeyboardInterrupt:
        stop.set()
    finally:
        client.close()


def node_signer(keystore: Path | None, account: LocalAccount) -> LocalAccount:
    """The key the node consents and signs with: `keystore`'s, else the one in
    $BATCHMARKET_SIGNER_PRIVATE_KEY, else the miner's `account` itself."""
    if keystore is not None:
        return load_account(keystore, ask_password, SIGNER_KEY_ENV, SIGNER_KEYSTORE_PASSWORD_ENV)
    return key_from_environment(SIGNER_KEY_ENV) or account


def relay_option(endpoint: str | None, key: str | None) -> RelayAddress | None:
    """The relay `--relay` and `--relay-key` name, checked; None without them."""
    if endpoint is None and key is None:
        return None
    if endpoint is None or key is None:
        raise UserError("--relay and --relay-key go together: the relay's address and the key it prints")
    try:
        check_stage_endpoint(endpoint)
    except ValueError as exc:
        raise UserError(f"--relay: {exc}") from None
    if not is_link_key(key):
        raise UserError(
            f"--relay-key: {key!r} is not a link key (40 characters of Z85, as the relay prints it)"
        )
    return RelayAddress(endpoint, key.encode())
