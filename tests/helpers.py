"""Small on-chain setup steps shared by the integration tests (real anvil, real contracts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils.crypto import keccak
from typer.testing import Result
from web3.contract.contract import ContractFunction

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import MinerProfile, Vote
from client_sdk.eip712 import ResultCommitment, sign_commitment
from client_sdk.encoding import short_string
from client_sdk.inputs import input_tree
from client_sdk.protocol.model_identity import model_id_of
from client_sdk.protocol.settlement import split
from client_sdk.protocol.task import TaskPrices
from client_sdk.results import ResultLeaf, ResultTrees
from demo.lifecycle import MODEL, DemoConfig, accept_task, create_task, price_results, simulate_inference

UNIT = 10**6


def profile_for(miner: LocalAccount, models: tuple[str, ...] = (MODEL,)) -> MinerProfile:
    return MinerProfile(
        signer=miner.address,
        gpu_class=short_string("A100-80GB"),
        vram_gb=80,
        gpu_count=1,
        region=short_string("us-east-1"),
        price_floor=0,
        endpoint="tcp://127.0.0.1:5555",
        model_ids=tuple(model_id_of(m) for m in models),
    )


def register_miner(admin: Market, miner: LocalAccount, stake: int) -> Market:
    """Mints `stake` to `miner`, approves and registers it through the SDK; returns the miner's market."""
    admin.token.mint(miner.address, stake)
    mine = admin.as_account(miner)
    mine.token.approve(mine.registry.address, stake)
    mine.registry.register(profile_for(miner), stake)
    return mine


def demo_task_for(market: Market, input_name: str, deadline: int) -> int:
    """A task created by `market`'s account with the demo parameters, over an input root named `input_name`
    (the account has approved the escrow already)."""
    config = DemoConfig()
    return market.tasks.create_task(
        model_id=model_id_of(MODEL),
        input_root=keccak(text=input_name),
        request_count=config.requests,
        params_hash=keccak(text="{}"),
        max_price=config.max_price,
        deadline=deadline,
        prices=TaskPrices(config.price_per_million_tokens, config.price_per_million_tokens),
    )


def assigned_task(
    admin: Market,
    coordinator: LocalAccount,
    user: LocalAccount,
    miners: list[LocalAccount],
    requests: list[dict[str, Any]] | None = None,
) -> int:
    """A task created by `user` with the demo parameters, assigned to `miners` (each staking 200 if not
    registered yet); over `requests` (its input root and count) when given."""
    config = DemoConfig() if requests is None else DemoConfig(requests=len(requests))
    for miner in miners:
        if not admin.registry.is_registered(miner.address):
            register_miner(admin, miner, config.miner_stake)
    admin.token.mint(user.address, config.max_price)
    root = None if requests is None else input_tree(requests).root
    task_id = create_task(admin.as_account(user), config, root)
    acceptances = accept_task(admin, task_id, miners, config.stake_lock)
    admin.as_account(coordinator).tasks.assign_task(
        task_id, [m.address for m in miners], config.stake_lock, acceptances
    )
    return task_id


@dataclass(frozen=True)
class Committed:
    task_id: int
    leaves: list[ResultLeaf]
    trees: ResultTrees
    commitment: ResultCommitment


def honest_results(
    admin: Market, task_id: int, miners: list[LocalAccount]
) -> tuple[list[ResultLeaf], ResultCommitment]:
    """The demo's results for an assigned task (see `assigned_task`): one leaf per request, served by all
    `miners`, and the commitment they sign, priced with the demo parameters."""
    config = DemoConfig()
    addresses = [m.address for m in miners]
    leaves = simulate_inference(task_id, config, addresses)
    return leaves, price_results(admin, task_id, leaves, addresses, config)


def committed_task(
    admin: Market,
    coordinator: LocalAccount,
    user: LocalAccount,
    miners: list[LocalAccount],
    extra_output_tokens: int = 0,
) -> Committed:
    """An assigned task (see `assigned_task`) whose results are committed: one leaf per request, served by all
    `miners`, priced with the demo parameters and signed by every miner. With `extra_output_tokens`, the
    commitment overstates the output tokens by that many and charges for them (split evenly), as colluding
    miners would."""
    config = DemoConfig()
    task_id = assigned_task(admin, coordinator, user, miners)
    addresses = [m.address for m in miners]
    leaves, commitment = honest_results(admin, task_id, miners)
    if extra_output_tokens:
        output_tokens = commitment.output_tokens + extra_output_tokens
        payment = admin.tasks.prices_of(task_id).cost(
            commitment.input_tokens, output_tokens, config.max_price
        )
        to_miners = payment - payment * admin.tasks.coordinator_fee_bps() // 10_000
        amounts = tuple(split(to_miners, [1] * len(miners)))
        commitment = replace(commitment, output_tokens=output_tokens, payment=payment, miner_amounts=amounts)
    chain_id, registry = admin.w3.eth.chain_id, admin.deployment.task_registry
    signatures = [sign_commitment(m, commitment, m.address, chain_id, registry) for m in miners]
    admin.as_account(coordinator).tasks.commit_results(commitment, signatures)
    return Committed(task_id, leaves, ResultTrees(leaves, addresses), commitment)


def owner_disputes(admin: Market, owner: LocalAccount, task: Committed, line: int = 0) -> int:
    """The task's owner is given the dispute bond, approves it and disputes `line` of the committed results;
    returns the dispute's id."""
    mine = admin.as_account(owner)
    bond = admin.arbitration.config_of(task.task_id).dispute_bond
    admin.token.mint(owner.address, bond)
    mine.token.approve(mine.escrow.address, bond)
    trees = task.trees
    return mine.arbitration.open_dispute(task.leaves[line], trees.proof(line), trees.served_proofs(line))


def govern(admin: Market, chain: Anvil, call: ContractFunction) -> None:
    """Runs an admin `call` the only way there is: scheduled in the timelock, executed after its delay."""
    admin.timelock.schedule(call)
    chain.advance_time(admin.timelock.min_delay())
    admin.timelock.execute(call)


def set_audit_rate(admin: Market, chain: Anvil, bps: int) -> None:
    """Audits `bps` of the tasks created from the next second on (through the timelock)."""
    config = replace(admin.arbitration.config(), audit_rate_bps=bps)
    govern(admin, chain, admin.arbitration.set_config_call(config))
    chain.advance_time(1)


def register_verifier(
    admin: Market, verifier: LocalAccount, seats: int = 1, model: bytes | None = None
) -> Market:
    """Mints `seats` minimum stakes to `verifier`, approves the verifier registry and registers it to judge
    `model` (by default MODEL, the model of the tasks these helpers create)."""
    stake = seats * admin.verifiers.min_stake()
    admin.token.mint(verifier.address, stake)
    mine = admin.as_account(verifier)
    mine.token.approve(mine.verifiers.address, stake)
    mine.verifiers.register(stake, [model_id_of(MODEL) if model is None else model])
    return mine


def run_round(
    admin: Market,
    chain: Anvil,
    dispute_id: int,
    jurors: dict[str, Market],
    vote: Vote | Callable[[str], Vote],
) -> list[str]:
    """Draws the current round (once a block after its seed block exists), has every drawn juror among
    `jurors` commit then reveal `vote` (or `vote(juror)`; Vote.NONE: stays silent), and moves the clock to
    the start of the appeal phase (`past_appeal` ends it); returns the drawn jurors."""
    record = admin.arbitration.get_dispute(dispute_id)
    seed_block = admin.arbitration.round_of(dispute_id, record.round).seed_block
    while admin.w3.eth.block_number <= seed_block:  # calls are estimated against the latest block
        chain.advance_time(1)
    admin.arbitration.draw_jury(dispute_id)
    drawn = admin.arbitration.jurors_of(dispute_id, record.round)
    choices = {juror: vote(juror) if callable(vote) else vote for juror in drawn}
    salt = bytes(32)
    for juror, choice in choices.items():
        if choice != Vote.NONE:
            market = jurors[juror]
            sealed = market.arbitration.vote_commitment(dispute_id, record.round, juror, choice, salt)
            market.arbitration.commit_vote(dispute_id, sealed)
    current = admin.arbitration.round_of(dispute_id, record.round)
    chain.advance_time(current.commit_deadline - admin.chain_time())
    for juror, choice in choices.items():
        if choice != Vote.NONE:
            jurors[juror].arbitration.reveal_vote(dispute_id, choice, salt)
    chain.advance_time(current.reveal_deadline - admin.chain_time())
    return drawn


def past_appeal(admin: Market, chain: Anvil, dispute_id: int) -> None:
    """Moves the clock to the end of the current round's appeal phase: anyone may resolve from then on."""
    record = admin.arbitration.get_dispute(dispute_id)
    deadline = admin.arbitration.round_of(dispute_id, record.round).appeal_deadline
    chain.advance_time(deadline - admin.chain_time())


def usage_error(result: Result) -> str:
    """The message of a command line refused as it is read (exit 2), without its panel's borders and wraps."""
    assert result.exit_code == 2, result.output
    return " ".join(result.stderr.replace("│", " ").replace("╭", " ").replace("╰", " ").split())
