"""Juries on the real contracts (anvil, through the SDK), attacked: twelve sybil verifiers registered first at
the minimum stake, colluding with a task owner who disputes a correct line, against four honest verifiers
holding most of the stake (50 seats each: the sybils' share is 6%, so their chance of a majority of the last
jury's 23 seats is about one in a billion). The sybils vote "at fault" in every round, the honest verifiers
vote "correct", and the miners appeal every conviction; the stake-weighted jury of the last round decides. The
honest miners lose nothing, every sybil seat loses half its stake to the honest jurors, and every balance is
exact. A jury that never reveals leaves the dispute undecided: the owner pays the no-decision fee to the
line's pipeline, every silent seat loses half its stake to the audit pool. And a juror reads its duty in plain
words from `arbitration status`."""

from __future__ import annotations

from pathlib import Path

from click.testing import Result
from eth_account import Account
from eth_account.signers.local import LocalAccount
from typer.testing import CliRunner

from client_sdk.chain.anvil import Anvil
from client_sdk.chain.contracts import Market
from client_sdk.chain.types import DisputeStatus, Vote
from client_sdk.cli.arbitration import app as arbitration_app
from demo.lifecycle import DemoConfig
from tests.helpers import committed_task, owner_disputes, past_appeal, register_verifier, run_round

LAST_ROUND = 2


def fresh_account(chain: Anvil) -> LocalAccount:
    """A new key with gas money (anvil_setBalance)."""
    account: LocalAccount = Account.create()
    chain.w3.provider.make_request("anvil_setBalance", [account.address, hex(10**20)])  # type: ignore[arg-type]
    return account


def test_a_sybil_minority_cannot_convict_honest_miners(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount]
) -> None:
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    sybils = {
        a.address: register_verifier(admin_market, a) for a in (fresh_account(chain) for _ in range(12))
    }
    honest = {a.address: register_verifier(admin_market, a, seats=50) for a in accounts[5:9]}
    jurors = sybils | honest
    seat_stake = admin_market.verifiers.min_stake()

    config = DemoConfig()
    task = committed_task(admin_market, coordinator, user, miners)
    task_id, leaves, trees, commitment = task.task_id, task.leaves, task.trees, task.commitment

    owner = admin_market.as_account(user)
    terms = admin_market.arbitration.config_of(task_id)
    admin_market.token.mint(user.address, terms.dispute_bond)
    owner.token.approve(owner.escrow.address, terms.dispute_bond)
    dispute_id = owner.arbitration.open_dispute(
        leaves[0], trees.proof(0), trees.served_proofs(0)
    )  # a correct line

    appellant = admin_market.as_account(miners[0])
    appeal_bonds = 0
    while True:
        run_round(
            admin_market,
            chain,
            dispute_id,
            jurors,
            lambda j: Vote.MINERS_AT_FAULT if j in sybils else Vote.MINERS_CORRECT,
        )
        record = admin_market.arbitration.get_dispute(dispute_id)
        current = admin_market.arbitration.round_of(dispute_id, record.round)
        if current.votes_at_fault <= current.votes_correct or record.round == LAST_ROUND:
            break
        bond = current.bond * 2  # the miners appeal the conviction
        admin_market.token.mint(miners[0].address, bond)
        appellant.token.approve(appellant.escrow.address, bond)
        appellant.arbitration.appeal(dispute_id)
        appeal_bonds += bond
    past_appeal(admin_market, chain, dispute_id)
    assert admin_market.arbitration.resolve(dispute_id) == DisputeStatus.MINERS_CORRECT

    seats: dict[str, int] = {}
    for round_index in range(record.round + 1):
        for juror in admin_market.arbitration.jurors_of(dispute_id, round_index):
            held = admin_market.arbitration.juror_of(dispute_id, round_index, juror).seats
            seats[juror] = seats.get(juror, 0) + held
    sybil_seats = sum(n for j, n in seats.items() if j in sybils)
    honest_seats = sum(n for j, n in seats.items() if j in honest)
    assert honest_seats > 0
    penalty = seat_stake * terms.juror_penalty_bps // 10_000
    reward = terms.dispute_bond * terms.verifier_reward_bps // 10_000
    per_seat = (sybil_seats * penalty + reward) // honest_seats
    for sybil in sybils:
        assert admin_market.verifiers.verifier_of(sybil).stake == seat_stake - seats.get(sybil, 0) * penalty
        assert admin_market.escrow.balance_of(sybil) == 0
    for juror in honest:
        assert admin_market.escrow.balance_of(juror) == per_seat * seats.get(juror, 0)
        assert admin_market.verifiers.verifier_of(juror).stake == 50 * seat_stake
    # The honest miners: stake whole, paid as committed, plus the forfeited bond less the jurors' share.
    rest = terms.dispute_bond - reward
    for i, miner in enumerate(miners):
        stake = admin_market.registry.stake_of(miner.address)
        assert (stake.free, stake.locked) == (config.miner_stake, 0)
        share = rest - rest // 2 if i == 0 else rest // 2
        expected = commitment.miner_amounts[i] + share + (appeal_bonds if i == 0 else 0)
        assert admin_market.escrow.balance_of(miner.address) == expected
    assert admin_market.escrow.balance_of(user.address) == config.max_price - commitment.payment


def test_a_jury_that_never_reveals_leaves_no_decision(
    admin_market: Market, chain: Anvil, accounts: list[LocalAccount]
) -> None:
    """Three verifiers drawn, one commits and none reveals: NoDecision. The results stand (the task settles as
    committed), the owner's bond comes back less the no-decision fee, which the line's pipeline shares (dust
    to its first miner), and each silent seat loses the penalty share of its seat stake; with no coherent seat
    to pay, the penalties go to the audit pool."""
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    jurors = {a.address: register_verifier(admin_market, a) for a in accounts[6:9]}
    task = committed_task(admin_market, coordinator, user, miners)
    dispute_id = owner_disputes(admin_market, user, task)
    bond = admin_market.arbitration.get_dispute(dispute_id).bond
    pool = admin_market.escrow.audit_pool()

    seed_block = admin_market.arbitration.round_of(dispute_id, 0).seed_block
    while admin_market.w3.eth.block_number <= seed_block:
        chain.advance_time(1)
    admin_market.arbitration.draw_jury(dispute_id)
    drawn = admin_market.arbitration.jurors_of(dispute_id, 0)
    assert set(drawn) <= set(jurors), "only eligible verifiers (each seat lands by weight, with replacement)"
    silent = jurors[drawn[0]]  # commits, then never reveals
    sealed = silent.arbitration.vote_commitment(dispute_id, 0, drawn[0], Vote.MINERS_CORRECT, bytes(32))
    silent.arbitration.commit_vote(dispute_id, sealed)
    past_appeal(admin_market, chain, dispute_id)
    assert admin_market.arbitration.resolve(dispute_id) == DisputeStatus.NO_DECISION

    record = admin_market.arbitration.get_dispute(dispute_id)
    seat_stake, terms = record.terms.seat_stake, record.terms
    penalty = seat_stake * terms.penalty_bps // 10_000
    assert penalty == seat_stake // 2, "the deploy script's default: half of each seat's stake"
    seats = {j: admin_market.arbitration.juror_of(dispute_id, 0, j).seats for j in drawn}
    assert sum(seats.values()) == 5
    lost = {j: min(seats[j] * penalty, seat_stake) for j in drawn}  # never more than the one seat it staked
    for juror in drawn:
        verifier = admin_market.verifiers.verifier_of(juror)
        assert (verifier.stake, verifier.locked) == (seat_stake - lost[juror], 0)
        assert admin_market.escrow.balance_of(juror) == 0
    assert admin_market.escrow.audit_pool() == pool + sum(lost.values())

    fee = bond * terms.no_decision_fee_bps // 10_000
    pipeline = admin_market.arbitration.pipeline_of(dispute_id)
    assert sorted(pipeline) == sorted(m.address for m in miners)
    share = fee // len(pipeline)
    paid = dict(zip(admin_market.tasks.miners_of(task.task_id), task.commitment.miner_amounts, strict=True))
    for i, miner in enumerate(pipeline):
        part = fee - share * (len(pipeline) - 1) if i == 0 else share
        assert admin_market.escrow.balance_of(miner) == paid[miner] + part
    refund = DemoConfig().max_price - task.commitment.payment
    assert admin_market.escrow.balance_of(user.address) == refund + bond - fee


def test_a_juror_reads_its_duty_in_plain_words(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    """`arbitration status` tells a verifier what it staked, what seats lock, and what each seat needs now;
    `exit` and `withdraw-stake` refuse with the reason until the stake is free."""
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    verifier = accounts[6]
    # the only verifier: every draw lands on it, whatever its seats of weight
    mine = register_verifier(admin_market, verifier, seats=20)

    def cli(*args: str) -> Result:
        env = {
            "BATCHMARKET_PRIVATE_KEY": verifier.key.to_0x_hex(),
            "BATCHMARKET_RPC_URL": chain.rpc_url,
            "BATCHMARKET_DEPLOYMENT": str(deployment_file),
        }
        return CliRunner().invoke(arbitration_app, list(args), env=env)

    idle = cli("status")
    assert idle.exit_code == 0, idle.output
    shown = f"{verifier.address}: 2000.000000 mUSD staked, 0.000000 mUSD held by jury seats; active"
    assert shown in idle.stdout

    task = committed_task(admin_market, coordinator, user, miners)
    dispute_id = owner_disputes(admin_market, user, task)
    seed_block = admin_market.arbitration.round_of(dispute_id, 0).seed_block
    while admin_market.w3.eth.block_number <= seed_block:
        chain.advance_time(1)
    admin_market.arbitration.draw_jury(dispute_id)
    seats = admin_market.arbitration.juror_of(dispute_id, 0, verifier.address).seats
    assert seats == 5, "the only verifier: all five seats, one seat stake each"

    due = cli("status")
    assert "500.000000 mUSD held by jury seats" in due.stdout
    assert f"dispute {dispute_id} round 0: 5 seat(s), 500.000000 locked; phase commit until " in due.stdout
    assert due.stdout.rstrip().endswith("needs: commit your vote")
    sealed = mine.arbitration.vote_commitment(dispute_id, 0, verifier.address, Vote.MINERS_CORRECT, bytes(32))
    mine.arbitration.commit_vote(dispute_id, sealed)
    assert cli("status").stdout.rstrip().endswith("needs: nothing for now")
    current = admin_market.arbitration.round_of(dispute_id, 0)
    chain.advance_time(current.commit_deadline - admin_market.chain_time())
    assert cli("status").stdout.rstrip().endswith("needs: reveal your vote")

    exited = cli("exit")
    assert exited.exit_code == 0, exited.output
    locked = cli("withdraw-stake")
    assert locked.exit_code == 1 and locked.stderr.startswith("error: the unbonding period ends at ")
    chain.advance_time(admin_market.verifiers.unbonding_period())
    still = cli("withdraw-stake")
    assert still.stderr.strip() == (
        "error: 500.000000 mUSD is still held by jury seats: wait for those disputes to end"
    )


def test_draw_appeal_and_resolve_from_the_command_line(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    """`arbitration dispute draw | appeal | resolve`: a miner convicted in round 0 appeals from its shell and
    posts twice the bond; the larger jury acquits; every refusal on the way is one clear line."""
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    jurors = {a.address: register_verifier(admin_market, a, seats=20) for a in accounts[5:8]}
    task = committed_task(admin_market, coordinator, user, miners)
    dispute_id = owner_disputes(admin_market, user, task)
    bond = admin_market.arbitration.get_dispute(dispute_id).bond

    def cli(account: LocalAccount, *args: str) -> Result:
        env = {
            "BATCHMARKET_PRIVATE_KEY": account.key.to_0x_hex(),
            "BATCHMARKET_RPC_URL": chain.rpc_url,
            "BATCHMARKET_DEPLOYMENT": str(deployment_file),
        }
        return CliRunner().invoke(arbitration_app, ["dispute", *args, str(dispute_id)], env=env)

    early = cli(miners[0], "appeal")
    assert early.exit_code == 1
    assert early.stderr.strip() == (
        f"error: dispute {dispute_id} cannot be appealed now: round 0 is waiting for its jury to be drawn"
    )
    seed_block = admin_market.arbitration.round_of(dispute_id, 0).seed_block
    soon = cli(user, "draw")
    assert soon.exit_code == 1
    assert soon.stderr.strip().startswith(
        f"error: dispute {dispute_id} round 0: its seed is the random value of block {seed_block}, "
        "not mined yet"
    )
    while admin_market.w3.eth.block_number <= seed_block:
        chain.advance_time(1)
    drawn = cli(user, "draw")
    assert drawn.exit_code == 0, drawn.output
    assert drawn.stdout.startswith(f"dispute {dispute_id} round 0: ")
    again = cli(user, "draw")
    assert again.stderr.strip() == f"error: dispute {dispute_id} round 0 has no jury left to draw"

    # Round 0: the jurors wrongly convict; the miner appeals; round 1 acquits.
    salt = bytes(32)
    for round_index, vote in ((0, Vote.MINERS_AT_FAULT), (1, Vote.MINERS_CORRECT)):
        if round_index == 1:
            seed_block = admin_market.arbitration.round_of(dispute_id, 1).seed_block
            while admin_market.w3.eth.block_number <= seed_block:
                chain.advance_time(1)
            assert cli(user, "draw").exit_code == 0
        seated = admin_market.arbitration.jurors_of(dispute_id, round_index)
        for juror in seated:
            sealed = jurors[juror].arbitration.vote_commitment(dispute_id, round_index, juror, vote, salt)
            jurors[juror].arbitration.commit_vote(dispute_id, sealed)
        current = admin_market.arbitration.round_of(dispute_id, round_index)
        chain.advance_time(current.commit_deadline - admin_market.chain_time())
        for juror in seated:
            jurors[juror].arbitration.reveal_vote(dispute_id, vote, salt)
        chain.advance_time(current.reveal_deadline - admin_market.chain_time())
        if round_index == 0:
            winner = cli(user, "appeal")
            assert (
                winner.stderr.strip()
                == f"error: the appeal bond is 10.000000 mUSD but {user.address} holds 0.000000 mUSD"
            )
            admin_market.token.mint(miners[0].address, 2 * bond)
            appealed = cli(miners[0], "appeal")
            assert appealed.exit_code == 0, appealed.output
            assert appealed.stdout.strip() == (
                f"dispute {dispute_id} appealed: round 1, 11 seats, bond 10.000000 mUSD posted (back to you "
                "if your side wins)"
            )
    early_resolve = cli(user, "resolve")
    assert early_resolve.stderr.startswith(
        f"error: dispute {dispute_id} round 1: the losing side may appeal until "
    )
    past_appeal(admin_market, chain, dispute_id)
    resolved = cli(user, "resolve")
    assert resolved.exit_code == 0, resolved.output
    assert resolved.stdout.startswith(f"dispute {dispute_id}: miners_correct: the results were correct")
    assert admin_market.escrow.balance_of(miners[0].address) >= 2 * bond, "the appeal bond came back"


def test_a_dispute_no_one_can_judge_ends_at_once_and_the_owner_s_bond_comes_back_whole(
    admin_market: Market, chain: Anvil, deployment_file: Path, accounts: list[LocalAccount]
) -> None:
    """No verifier judges the task's model: the drawn round 0 seats nobody, says so, ends at once (no phase to
    wait out) and resolves undecided; the owner gets its bond back whole (no fee for a jury no one could sit
    on) and the miners are paid as committed."""
    coordinator, user, miners = accounts[1], accounts[2], accounts[3:5]
    task = committed_task(admin_market, coordinator, user, miners)
    assert admin_market.verifiers.total_weight(admin_market.tasks.get_task(task.task_id).model_id) == 0
    dispute_id = owner_disputes(admin_market, user, task)
    bond = admin_market.arbitration.get_dispute(dispute_id).bond
    seed_block = admin_market.arbitration.round_of(dispute_id, 0).seed_block
    while admin_market.w3.eth.block_number <= seed_block:
        chain.advance_time(1)
    env = {
        "BATCHMARKET_PRIVATE_KEY": user.key.to_0x_hex(),
        "BATCHMARKET_RPC_URL": chain.rpc_url,
        "BATCHMARKET_DEPLOYMENT": str(deployment_file),
    }
    drawn = CliRunner().invoke(
        arbitration_app, ["dispute", "draw", str(dispute_id)], env=env, terminal_width=200
    )
    assert drawn.exit_code == 0, drawn.output
    assert f"dispute {dispute_id} round 0: no seat could be drawn" in drawn.stdout
    assert "the opener's bond comes back whole" in drawn.stdout
    assert admin_market.arbitration.resolve(dispute_id) == DisputeStatus.NO_DECISION  # at once
    config = DemoConfig()
    assert admin_market.escrow.balance_of(user.address) == config.max_price - task.commitment.payment + bond
    for miner, amount in zip(miners, task.commitment.miner_amounts, strict=True):
        assert admin_market.escrow.balance_of(miner.address) == amount
