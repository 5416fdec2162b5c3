"""`miner`: register a GPU machine on-chain with a stake, inspect it, change its endpoint, manage the stake
(`miner stake add/withdraw/show`), withdraw earnings; run a batch through a local multi-process pipeline."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from eth_account import Account
from eth_account.signers.local import LocalAccount

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import MinerProfile, Stake
from client_sdk.cli.support import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    DeploymentOption,
    DeviceOption,
    DtypeOption,
    JsonOption,
    KeystoreOption,
    ModelDirOption,
    RpcUrlOption,
    command_group,
    console,
    error_console,
    on_chain,
    one_line_errors,
    open_market,
    show_report,
)
from client_sdk.encoding import read_short_string, short_string
from client_sdk.errors import UserError
from client_sdk.keys import SIGNER_KEY_ENV, SIGNER_KEYSTORE_PASSWORD_ENV, write_keystore
from client_sdk.protocol.endpoint import check_stage_endpoint
from client_sdk.protocol.model_identity import describe, model_hash, model_id_of
from client_sdk.protocol.task import TaskStatus
from client_sdk.units import format_amount, format_utc, parse_amount
from miner.cli import relay as relay_command
from miner.cli import serve as node_command

app = command_group(
    "Run a miner: register your GPUs on-chain with a stake, check them, manage the stake, withdraw earnings; "
    "run a batch through a local pipeline."
)
stake_app = command_group("Your stake: add to it, take it out (unbonding first), show it.")
app.add_typer(stake_app, name="stake")
signer_app = command_group(
    "The key that signs your results and consents (your signer): point it at a new key, or revoke a leaked "
    "one for the tasks you accepted with it. Run these with the miner's own account key, not the signer's."
)
app.add_typer(signer_app, name="signer")


@app.command()
@one_line_errors
def register(
    stake: Annotated[str, typer.Option(help="Tokens to stake, e.g. 100 or 250.5.")],
    gpu: Annotated[str, typer.Option(help="GPU class, e.g. H100-80GB (at most 32 bytes).")],
    vram_gb: Annotated[int, typer.Option(min=1, help="Memory of one GPU in GB.")],
    region: Annotated[str, typer.Option(help="Where the machine is, e.g. us-east-1.")],
    endpoint: Annotated[
        str, typer.Option(help="Where the previous pipeline stage reaches this miner, e.g. tcp://HOST:5555.")
    ],
    model: Annotated[
        list[str] | None,
        typer.Option(
            help="A model this miner serves, by its 0x model hash or a known model's name; repeatable."
        ),
    ] = None,
    model_dir: Annotated[
        list[Path] | None,
        typer.Option(help="A checkpoint directory this miner serves (registered as its hash); repeatable."),
    ] = None,
    gpu_count: Annotated[int, typer.Option(min=1, max=65535, help="Number of GPUs.")] = 1,
    price_floor: Annotated[str, typer.Option(help="Lowest price per million tokens you accept.")] = "0",
    signer: Annotated[
        str | None, typer.Option(help="Address that signs results (default: this account).")
    ] = None,
    approve: Annotated[
        bool, typer.Option(help="Approve the registry to take the stake first (--no-approve: already done).")
    ] = True,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
) -> None:
    """Register this machine and stake tokens (approval included)."""
    amount = parse_amount(stake)
    try:
        check_stage_endpoint(endpoint)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    profile = MinerProfile(
        signer="",
        gpu_class=short_string(gpu),
        vram_gb=vram_gb,
        gpu_count=gpu_count,
        region=short_string(region),
        price_floor=parse_amount(price_floor),
        endpoint=endpoint,
        model_ids=_model_ids(model or [], model_dir or []),
    )
    market = open_market(rpc_url, deployment, keystore, signing=True)
    me = market.address
    profile = replace(profile, signer=market.w3.to_checksum_address(signer or me))
    _check_can_register(market, me, amount, approve)
    with market.token.allowing(me, market.registry.address, amount if approve else 0):
        market.registry.register(profile, amount)
    console.print(f"registered {me} with a stake of {market.amount(amount)}")


def _model_ids(names: list[str], directories: list[Path]) -> tuple[bytes, ...]:
    """The registered model ids: each --model's (hash or known name) and each --model-dir's hash."""
    ids = tuple(model_id_of(value) for value in names) + tuple(model_hash(d) for d in directories)
    if not ids:
        raise UserError("name the models this miner serves: --model NAME_OR_HASH or --model-dir CHECKPOINT")
    return ids


def _registered(market: Market) -> str:
    """This miner's address (the market signs as it); a one-line error unless it is registered."""
    me = market.address
    if not market.registry.is_registered(me):
        raise UserError(f"{me} is not registered; run `miner register` first")
    return me


def _check_can_register(market: Market, me: str, amount: int, approve: bool) -> None:
    """The common reasons a registration would revert, each as its own clear sentence."""
    if market.registry.is_registered(me):
        raise UserError(f"{me} is already registered; use `miner status` to see it")
    minimum = market.registry.min_stake()
    if amount < minimum:
        raise UserError(
            f"stake {market.amount(amount)} is below the minimum stake of {market.amount(minimum)}"
        )
    balance = market.token.balance_of(me)
    if balance < amount:
        raise UserError(
            f"insufficient token balance: {me} holds {market.amount(balance)}, "
            f"the stake is {market.amount(amount)}"
        )
    allowance = market.token.allowance(me, market.registry.address)
    if not approve and allowance < amount:
        raise UserError(
            f"insufficient allowance: the registry may take {market.amount(allowance)}, the stake is "
            f"{market.amount(amount)}; approve it or drop --no-approve"
        )


@app.command()
@on_chain(signing=True)
def status(
    market: Market,
    as_json: JsonOption = False,
) -> None:
    """Show this miner's registration, stake and withdrawable earnings."""
    me = _registered(market)
    profile = market.registry.profile_of(me)
    stake = market.registry.stake_of(me)
    report = {
        "miner": me,
        "signer": profile.signer,
        "gpu": read_short_string(profile.gpu_class),
        "gpu_count": profile.gpu_count,
        "vram_gb": profile.vram_gb,
        "region": read_short_string(profile.region),
        "endpoint": profile.endpoint,
        "models": [describe(m) for m in profile.model_ids],
        "stake_free": format_amount(stake.free),
        "stake_locked": format_amount(stake.locked),
        "stake_unbonding": format_amount(stake.unbonding),
        "unbonding_release_at": format_utc(stake.unbonding_release_at) if stake.unbonding else None,
        "earnings_withdrawable": format_amount(market.escrow.balance_of(me)),
        "wallet_balance": format_amount(market.token.balance_of(me)),
        "token": market.token.symbol,
    }
    show_report(report, f"miner {me}", as_json)


@app.command()
@on_chain(signing=True)
def update(
    market: Market,
    endpoint: Annotated[
        str, typer.Option(help="The new address the previous pipeline stage dials, e.g. tcp://HOST:5555.")
    ],
) -> None:
    """Change this miner's registered endpoint (restart `miner serve` for it to take effect)."""
    try:
        check_stage_endpoint(endpoint)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    me = _registered(market)
    old = market.registry.profile_of(me).endpoint
    if old == endpoint:
        console.print(f"the endpoint is already {endpoint}; nothing to change")
        return
    market.registry.set_endpoint(endpoint)
    console.print(f"endpoint changed from {old} to {endpoint}; restart `miner serve` to use it")


@signer_app.command("new")
@one_line_errors
def signer_new(
    keystore: Annotated[Path, typer.Argument(help="Where to write the new key's encrypted keystore.")],
) -> None:
    """Make a new signer key in an encrypted keystore file (password from
    BATCHMARKET_SIGNER_KEYSTORE_PASSWORD or a prompt), and print its address.

    Then register it with `miner signer set ADDRESS` (with the account's key) and give the file to
    `miner serve --signer-keystore`. Needs no chain."""
    if keystore.exists():
        raise UserError(f"{keystore} exists; give a new file (an existing key is never overwritten)")
    password = os.environ.get(SIGNER_KEYSTORE_PASSWORD_ENV)
    if password is None:
        password = typer.prompt("Password for the new keystore", hide_input=True, confirmation_prompt=True)
    if not password:
        raise UserError("the keystore's password is empty: give one")
    signer: LocalAccount = Account.create()
    try:
        write_keystore(signer, keystore, password)
    except OSError as exc:
        raise UserError(f"cannot write {keystore}: {exc.strerror}") from None
    console.print(f"new signer {signer.address} in {keystore}", soft_wrap=True)  # a path stays whole
    console.print(
        f"next: miner signer set {signer.address}; then miner serve --signer-keystore {keystore}",
        soft_wrap=True,
    )


@signer_app.command("set")
@on_chain(signing=True)
def signer_set(
    market: Market,
    signer: Annotated[str, typer.Argument(help="The new signer's address (0x and 40 hex digits).")],
) -> None:
    """Point your signer at a new key, for the tasks you accept from now on.

    A task keeps the signer it was accepted with: revoke a leaked one there with `miner signer revoke`."""
    me = _registered(market)
    if not market.w3.is_address(signer):
        raise UserError(f"{signer!r} is not an address (0x and 40 hex digits)")
    new = market.w3.to_checksum_address(signer)
    old = market.registry.profile_of(me).signer
    if old == new:
        console.print(f"the signer is already {new}; nothing to change")
        return
    market.registry.set_signer(new)
    console.print(f"signer changed from {old} to {new} for the tasks you accept from now on")
    if new != me:
        console.print(
            f"give `miner serve` this signer's key with --signer-keystore FILE (or {SIGNER_KEY_ENV}); a node "
            "already running goes on with the tasks it accepted and accepts no new one until restarted so"
        )


@signer_app.command("revoke")
@on_chain(signing=True)
def signer_revoke(
    market: Market,
    task_ids: Annotated[list[int], typer.Argument(min=1, help="The tasks (ids) to revoke the signer on.")],
) -> None:
    """Revoke a leaked signer on the tasks you accepted with it.

    Each task given refuses that key's signature and vouch from now on and drops its vouch, so a thief cannot
    make you answer for totals it signs. You are then left out of the task's results (paid nothing, answering
    for nothing) unless your own account vouches for them on-chain. Only while a task is assigned, not yet
    committed."""
    me = _registered(market)
    tasks = market.tasks
    slots = {task_id: _my_open_slot(market, me, task_id) for task_id in task_ids}  # every id checked first
    for task_id, index in slots.items():
        if tasks.revoked_mask_of(task_id) >> index & 1:
            console.print(f"task {task_id}: already revoked")
            continue
        tasks.revoke_signer(task_id)
        console.print(f"task {task_id}: revoked signer {tasks.signers_of(task_id)[index]}")


def _my_open_slot(market: Market, me: str, task_id: int) -> int:
    """This miner's position among task `task_id`'s assigned miners; a one-line error unless the task exists,
    is assigned to it and is not committed yet."""
    tasks = market.tasks
    if not 1 <= task_id <= tasks.task_count():
        raise UserError(f"there is no task {task_id}")
    assigned = [m.lower() for m in tasks.miners_of(task_id)]
    if me.lower() not in assigned:
        raise UserError(f"task {task_id} is not assigned to {me}")
    status = tasks.get_task(task_id).status
    if status != TaskStatus.ASSIGNED:
        state = status.name.lower().replace("_", " ")
        raise UserError(f"task {task_id} is {state}: a signer is revoked only while it is assigned")
    return assigned.index(me.lower())


@stake_app.command("add")
@on_chain(signing=True)
def stake_add(
    market: Market,
    amount: Annotated[str, typer.Argument(help="Tokens to add to the stake, e.g. 50 or 12.5.")],
    approve: Annotated[
        bool, typer.Option(help="Approve the registry to take them first (--no-approve: already done).")
    ] = True,
) -> None:
    """Add tokens to this miner's stake (free at once: more tasks can lock it), approval included."""
    value = parse_amount(amount)
    me = _registered(market)
    if value == 0:
        raise UserError("the amount to stake must be more than 0")
    balance = market.token.balance_of(me)
    if balance < value:
        raise UserError(
            f"insufficient token balance: {me} holds {market.amount(balance)}, asked to stake "
            f"{market.amount(value)}"
        )
    with market.token.allowing(me, market.registry.address, value if approve else 0):
        market.registry.add_stake(value)
    free = market.registry.stake_of(me).free
    console.print(f"staked {market.amount(value)} more; {market.amount(free)} of the stake is free")


@stake_app.command("withdraw")
@on_chain(signing=True)
def stake_withdraw(
    market: Market,
    amount: Annotated[
        str | None, typer.Option(help="Start unbonding this much of the free stake, e.g. 50.")
    ] = None,
    all_free: Annotated[bool, typer.Option("--all", help="Start unbonding all of the free stake.")] = False,
) -> None:
    """Take stake out in two steps: with --amount or --all, start unbonding free stake; once the unbonding
    period has passed, without them, move the unbonded stake to your wallet."""
    me = _registered(market)
    stake = market.registry.stake_of(me)
    if amount is None and not all_free:
        if stake.unbonding == 0:
            raise UserError("nothing is unbonding: start with `miner stake withdraw --amount X` (or --all)")
        if market.chain_time() < stake.unbonding_release_at:
            raise UserError(
                f"{market.amount(stake.unbonding)} unbonds at {format_utc(stake.unbonding_release_at)}; "
                "withdraw it then"
            )
        market.registry.withdraw_stake()
        console.print(f"withdrew unbonded stake of {market.amount(stake.unbonding)} to your wallet")
        return
    value = stake.free if all_free else parse_amount(amount or "0")
    if value == 0:
        raise UserError("no free stake to unbond (locked stake is released when its tasks settle)")
    if value > stake.free:
        raise UserError(f"cannot unbond {market.amount(value)}: only {market.amount(stake.free)} is free")
    market.registry.request_unstake(value)
    release = market.registry.stake_of(me).unbonding_release_at
    console.print(
        f"unbonding {market.amount(value)}; `miner stake withdraw` moves it to your wallet after "
        f"{format_utc(release)}"
    )
    for warning in _unbonding_warnings(market, stake, value, release):
        error_console.print(f"warning: {warning}", soft_wrap=True, markup=False)


def _unbonding_warnings(market: Market, before: Stake, value: int, release: int) -> list[str]:
    """What an unbonding of `value` from the stake `before` does besides: restart the wait of stake already
    unbonding (the contract keeps one release time), and leave less free stake than the registry's minimum."""
    warnings = []
    if before.unbonding:
        due = format_utc(before.unbonding_release_at)
        warnings.append(
            f"the {market.amount(before.unbonding)} already unbonding (due {due}) waits again with it: all "
            f"{market.amount(before.unbonding + value)} unbond at {format_utc(release)}"
        )
    left, minimum = before.free - value, market.registry.min_stake()
    if left < minimum:
        warnings.append(
            f"this leaves {market.amount(left)} of free stake, under the {market.amount(minimum)} a "
            "registration must stake; every task this node takes locks part of what is free"
        )
    return warnings


@stake_app.command("show")
@on_chain(signing=True)
def stake_show(
    market: Market,
    as_json: JsonOption = False,
) -> None:
    """Show this miner's stake: free (tasks can lock it), locked by tasks, unbonding and when."""
    me = _registered(market)
    stake = market.registry.stake_of(me)
    report = {
        "free": format_amount(stake.free),
        "locked": format_amount(stake.locked),
        "unbonding": format_amount(stake.unbonding),
        "unbonded_at": format_utc(stake.unbonding_release_at) if stake.unbonding else None,
        "minimum": format_amount(market.registry.min_stake()),
        "token": market.token.symbol,
    }
    show_report(report, f"stake of {me}", as_json)


@app.command()
@on_chain(signing=True)
def withdraw(
    market: Market,
) -> None:
    """Withdraw your earnings (what the escrow owes you); stake comes out with `miner stake withdraw`."""
    me = market.address
    earnings = market.escrow.balance_of(me)
    if earnings == 0:
        raise UserError("no earnings to withdraw yet (stake comes out with `miner stake withdraw`)")
    market.escrow.withdraw()
    console.print(f"withdrew earnings of {market.amount(earnings)}")


@app.command("run-local")
@one_line_errors
def run_local(
    model_dir: ModelDirOption,
    input_file: Annotated[
        Path,
        typer.Option(
            "--input", help="OpenAI Batch JSONL file of POST /v1/chat/completions or /v1/completions lines."
        ),
    ],
    output: Annotated[
        Path, typer.Option(help="Where to write the output lines (OpenAI Batch output format).")
    ],
    errors: Annotated[
        Path | None,
        typer.Option(help="Where to write error lines (default: next to --output, ending in .errors.jsonl)."),
    ] = None,
    stages: Annotated[
        int, typer.Option(min=1, help="Pipeline stages, one process each; layers split evenly.")
    ] = 2,
    microbatches: Annotated[
        str,
        typer.Option(
            help="Microbatches in flight, or 'auto': enough to keep every stage busy, from a measured stage "
            "time and --latency-ms (DeServe)."
        ),
    ] = "auto",
    offload: Annotated[
        bool | None,
        typer.Option(
            "--offload/--no-offload",
            help="Keep half of each microbatch's KV pages in host memory between its turns (DeServe). "
            "Default: on a GPU; off on a CPU, whose host memory is the same memory (it only costs time).",
            show_default=False,
        ),
    ] = None,
    latency_ms: Annotated[
        float,
        typer.Option(
            "--latency-ms",
            "--link-latency-ms",
            min=0,
            help="One-way latency added to every link between stages, for experiments.",
        ),
    ] = 0.0,
    dtype: DtypeOption = "float32",
    device: DeviceOption = "cpu",
    max_batch_size: Annotated[
        int,
        typer.Option(
            min=1,
            help="Sequences per microbatch; KV memory is reserved for this many of the batch's longest "
            "request.",
        ),
    ] = 64,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="CPU threads each stage computes on (default: the machine's cores split between the "
            "stages).",
        ),
    ] = None,
) -> None:
    """Run an OpenAI Batch file through an N-stage pipeline of local processes and write the results."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from miner.pipeline.batch import RunSettings, run_batch

    if microbatches != "auto" and not (microbatches.isdigit() and int(microbatches) >= 1):
        raise UserError(f"--microbatches must be a positive integer or 'auto', not {microbatches!r}")
    settings = RunSettings(
        stages=stages,
        microbatches=None if microbatches == "auto" else int(microbatches),
        offload=device != "cpu" if offload is None else offload,
        latency_ms=latency_ms,
        dtype=dtype,
        device=device,
        max_batch_size=max_batch_size,
        threads=threads,
    )
    errors_path = errors or output.with_name(output.name.removesuffix(".jsonl") + ".errors.jsonl")
    columns = (TextColumn("requests"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=error_console, transient=True) as progress:
        task = progress.add_task("requests", total=None)
        try:
            summary = run_batch(
                model_dir,
                input_file,
                output,
                errors_path,
                settings,
                lambda done, total: progress.update(task, completed=done, total=total),
            )
        except (RuntimeError, TimeoutError) as exc:
            raise UserError(f"the pipeline failed: {exc}") from None
    rate = summary.output_tokens / summary.seconds if summary.seconds else 0.0
    console.print(
        f"{summary.completed} requests completed, {summary.errors} failed (see {errors_path}); "
        f"{summary.output_tokens} output tokens in {summary.seconds:.1f} s ({rate:.1f} tokens/s) over "
        f"{stages} stages and {summary.microbatches} microbatches; results in {output}"
    )


app.command("serve")(one_line_errors(node_command.serve))
app.command("relay")(one_line_errors(relay_command.relay))
