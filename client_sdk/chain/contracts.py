"""Typed wrappers over the deployed contracts. Reads need only a Web3; writes need a Transactor."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractFunction
from web3.logs import DISCARD
from web3.types import TxReceipt

from client_sdk.abis import load_abi
from client_sdk.chain.deployment import Deployment
from client_sdk.chain.headers import header_rlp
from client_sdk.chain.rpc import open_rpc
from client_sdk.chain.transactions import SendingLock, Transactor, call_view
from client_sdk.chain.types import (
    ArbitrationConfig,
    Audit,
    Challenge,
    ChallengeStatus,
    Dispute,
    DisputeStatus,
    Juror,
    MinerProfile,
    Resolution,
    Round,
    Stake,
    Verifier,
    Vote,
)
from client_sdk.eip712 import Acceptance, ResultCommitment
from client_sdk.errors import ChainError, ContractRevert, UserError
from client_sdk.protocol.structs import from_abi, to_abi
from client_sdk.protocol.task import Task, TaskPrices, TaskTerms
from client_sdk.results import ResultLeaf, ResultTrees
from client_sdk.units import format_amount


def _leaf_with_proofs(
    leaf: ResultLeaf, proof: Sequence[bytes], served_proofs: Sequence[Sequence[bytes]]
) -> tuple[tuple[Any, ...], list[bytes], list[list[bytes]]]:
    """A leaf, its results proof and its served proofs as the contracts take them (every call that proves a
    leaf and names the miners accountable for it)."""
    return leaf.as_tuple(), list(proof), [list(p) for p in served_proofs]


class _Bound:
    abi_name = ""

    def __init__(self, w3: Web3, address: str, transactor: Transactor | None) -> None:
        self.w3 = w3
        self.address = Web3.to_checksum_address(address)
        self.contract: Contract = w3.eth.contract(address=self.address, abi=load_abi(self.abi_name))
        self._transactor = transactor

    def _send(self, call: ContractFunction) -> TxReceipt:
        if self._transactor is None:
            raise UserError("this action needs a key: set BATCHMARKET_PRIVATE_KEY or pass --keystore")
        return self._transactor.send(call)


class _StakeRegistry(_Bound):
    """A registry its members stake in: the least stake, and how long a stake waits (unbonds) before it can
    be withdrawn."""

    def min_stake(self) -> int:
        return int(self.contract.functions.minStake().call())

    def unbonding_period(self) -> int:
        return int(self.contract.functions.unbondingPeriod().call())


_ALLOWANCE_LOCKS: dict[tuple[str, str, str], threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _allowance_lock(token: str, owner: str, spender: str) -> threading.Lock:
    """This process's one lock of an allowance."""
    key = (token.lower(), owner.lower(), spender.lower())
    with _LOCKS_GUARD:
        return _ALLOWANCE_LOCKS.setdefault(key, threading.Lock())


class Token(_Bound):
    abi_name = "MockStablecoin"

    def balance_of(self, account: str) -> int:
        return int(self.contract.functions.balanceOf(account).call())

    @functools.cached_property
    def symbol(self) -> str:
        """The token's symbol, e.g. mUSD, as the contract states it (at most 16 characters are shown)."""
        return str(self.contract.functions.symbol().call())[:16]

    def allowance(self, owner: str, spender: str) -> int:
        return int(self.contract.functions.allowance(owner, spender).call())

    def approve(self, spender: str, amount: int) -> TxReceipt:
        return self._send(self.contract.functions.approve(spender, amount))

    @contextlib.contextmanager
    def allowing(self, owner: str, spender: str, amount: int) -> Iterator[None]:
        """Lets `spender` pull `amount` of `owner`'s tokens (`owner` signs; approving only if the allowance
        falls short) for the call made inside the block, which spends it. Concurrent spenders from one wallet
        in this process take turns: each approval would otherwise overwrite another's before it is spent."""
        with _allowance_lock(self.address, owner, spender):
            if self.allowance(owner, spender) < amount:
                self.approve(spender, amount)
            yield

    def transfer(self, to: str, amount: int) -> TxReceipt:
        return self._send(self.contract.functions.transfer(to, amount))

    def can_mint(self, account: str) -> bool:
        """Whether `account` holds the mock token's minter role (on a devnet: the deployer)."""
        role = self.contract.functions.MINTER_ROLE().call()
        return bool(self.contract.functions.hasRole(role, account).call())

    def mint(self, to: str, amount: int) -> TxReceipt:
        """Devnet only: needs the mock token's minter role."""
        return self._send(self.contract.functions.mint(to, amount))


class GPURegistry(_StakeRegistry):
    abi_name = "GPURegistry"

    def is_registered(self, miner: str) -> bool:
        return bool(self.contract.functions.isRegistered(miner).call())

    def profile_of(self, miner: str) -> MinerProfile:
        return from_abi(MinerProfile, self.contract.functions.profileOf(miner).call())

    def stake_of(self, miner: str) -> Stake:
        return from_abi(Stake, self.contract.functions.stakeOf(miner).call())

    def register(self, profile: MinerProfile, stake: int) -> TxReceipt:
        return self._send(self.contract.functions.register(to_abi(profile), stake))

    def add_stake(self, amount: int) -> TxReceipt:
        return self._send(self.contract.functions.addStake(amount))

    def set_endpoint(self, endpoint: str) -> TxReceipt:
        """Changes the endpoint the previous stage dials (the caller checks its form first)."""
        return self._send(self.contract.functions.setEndpoint(endpoint))

    def set_signer(self, signer: str) -> TxReceipt:
        """Registers `signer` as the key that accepts and signs this miner's tasks from now on; a task
        accepted before keeps the signer it was accepted with."""
        return self._send(self.contract.functions.setSigner(signer))

    def request_unstake(self, amount: int) -> TxReceipt:
        return self._send(self.contract.functions.requestUnstake(amount))

    def withdraw_stake(self) -> TxReceipt:
        return self._send(self.contract.functions.withdrawStake())


class PaymentEscrow(_Bound):
    abi_name = "PaymentEscrow"

    def balance_of(self, account: str) -> int:
        """Withdrawable pull-payment balance."""
        return int(self.contract.functions.balanceOf(account).call())

    def escrow_of(self, task_id: int) -> int:
        return int(self.contract.functions.escrowOf(task_id).call())

    def audit_pool(self) -> int:
        """Tokens in the audit pool, which posts the bonds of random audits."""
        return int(self.contract.functions.auditPool().call())

    def spend_audit_pool_call(self, to: str, amount: int) -> ContractFunction:
        """The admin call that credits `amount` of the audit pool to `to`; the admin role sits with the
        timelock, so schedule it there (`Market.timelock`)."""
        return self.contract.functions.spendAuditPool(to, amount)

    def withdraw(self) -> TxReceipt:
        return self._send(self.contract.functions.withdraw())


class TaskRegistry(_Bound):
    abi_name = "TaskRegistry"

    def get_task(self, task_id: int) -> Task:
        return from_abi(Task, self.contract.functions.getTask(task_id).call())

    def task_count(self) -> int:
        """Tasks created so far; ids run from 1 to this."""
        return int(self.contract.functions.taskCount().call())

    def miners_of(self, task_id: int) -> list[str]:
        return list(self.contract.functions.minersOf(task_id).call())

    def challenge_window(self) -> int:
        """The window for tasks created from now on; a task's own is in `challenge_ends_at`."""
        return int(self.contract.functions.challengeWindow().call())

    def challenge_ends_at(self, task_id: int) -> int:
        """End of the task's challenge window (its own window, extended by audits that ran); 0 before
        commit."""
        return int(self.contract.functions.challengeEndsAt(task_id).call())

    def prices_of(self, task_id: int) -> TaskPrices:
        """What the task's owner pays per million input and output tokens."""
        return from_abi(TaskPrices, self.contract.functions.pricesOf(task_id).call())

    def terms_of(self, task_id: int) -> TaskTerms:
        """The window, fee, stake-lock floor and value cap the task was created under."""
        return from_abi(TaskTerms, self.contract.functions.termsOf(task_id).call())

    def max_value_at_risk(self) -> int:
        """Most a task created now may put at stake in one dispute: maximum price plus every stake lock."""
        return int(self.contract.functions.maxValueAtRisk().call())

    def coordinator_of(self, task_id: int) -> str:
        return str(self.contract.functions.coordinatorOf(task_id).call())

    def min_stake_lock(self) -> int:
        return int(self.contract.functions.minStakeLock().call())

    def miner_amounts_of(self, task_id: int) -> list[int]:
        return [int(a) for a in self.contract.functions.minerAmountsOf(task_id).call()]

    def coordinator_fee_bps(self) -> int:
        return int(self.contract.functions.coordinatorFeeBps().call())

    def commitment_digest(self, commitment: ResultCommitment, miner: str) -> bytes:
        """The digest assigned miner `miner` signs."""
        call = self.contract.functions.commitmentDigest(commitment.task_id, commitment.as_tuple(), miner)
        return bytes(call.call())

    def create_task(
        self,
        model_id: bytes,
        input_root: bytes,
        request_count: int,
        params_hash: bytes,
        max_price: int,
        deadline: int,
        prices: TaskPrices,
    ) -> int:
        """Creates the task at `prices` (the caller must have approved the escrow for max_price); returns its
        id."""
        params = (model_id, input_root, request_count, params_hash, max_price, deadline, *to_abi(prices))
        receipt = self._send(self.contract.functions.createTask(params))
        (event,) = self.contract.events.TaskCreated().process_receipt(receipt, errors=DISCARD)
        return int(event["args"]["taskId"])

    def cancel_task(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.cancelTask(task_id))

    def release_task(self, task_id: int) -> TxReceipt:
        """The coordinator gives up a task with no results: its whole escrow back to the owner, every
        assigned miner's stake unlocked (Open: any coordinator, at once; Assigned: the one that assigned it,
        once the notice of `request_release` has passed and only if no miner vouched for results)."""
        return self._send(self.contract.functions.releaseTask(task_id))

    def request_release(self, task_id: int) -> TxReceipt:
        """The coordinator that assigned the task announces its release: `release_task` goes through
        `release_notice()` seconds later unless a miner vouches for results first."""
        return self._send(self.contract.functions.requestRelease(task_id))

    def release_notice(self) -> int:
        """Seconds between an assigned task's release request and the release."""
        return int(self.contract.functions.RELEASE_NOTICE().call())

    def release_at_of(self, task_id: int) -> int:
        """Chain time from which a requested release may go through (0: none requested)."""
        return int(self.contract.functions.releaseAtOf(task_id).call())

    def vouch_results(self, commitment: ResultCommitment) -> TxReceipt:
        """An assigned miner vouches on-chain for the commitment, as its signature would: it stands in for the
        signature in `commit_results` and stops the task from being released."""
        return self._send(self.contract.functions.vouchResults(commitment.task_id, commitment.as_tuple()))

    def revoke_signer(self, task_id: int) -> TxReceipt:
        """An assigned miner (its own account) revokes the signer it accepted Assigned task `task_id` with
        (a leaked key): that key's signature and vouch are refused for the task from now on, its standing
        vouch dropped; the miner is left out of the commitment unless its account vouches."""
        return self._send(self.contract.functions.revokeSigner(task_id))

    def revoked_mask_of(self, task_id: int) -> int:
        """Bit i set: assigned miner i revoked the signer it accepted the task with."""
        return int(self.contract.functions.revokedMaskOf(task_id).call())

    def vouches_of(self, task_id: int) -> list[bytes]:
        """Per assigned miner, the commitment digest it vouched for on-chain (32 zero bytes where none; an
        empty list while no miner vouched)."""
        return [bytes(d) for d in self.contract.functions.vouchesOf(task_id).call()]

    def assign_task(
        self, task_id: int, miners: Sequence[str], stake_lock: int, acceptances: Sequence[Acceptance]
    ) -> TxReceipt:
        """Locks `stake_lock` of each miner's stake for the task (the coordinator), with `acceptances[i]`,
        miner i's consent to exactly this task and lock."""
        call = self.contract.functions.assignTask(
            task_id, list(miners), stake_lock, [to_abi(a) for a in acceptances]
        )
        return self._send(call)

    def acceptance_digest(self, task_id: int, miner: str, stake_lock: int, expiry: int) -> bytes:
        """The digest `miner`'s signer signs to accept the task (the contract's own computation)."""
        return bytes(self.contract.functions.acceptanceDigest(task_id, miner, stake_lock, expiry).call())

    def signers_of(self, task_id: int) -> list[str]:
        """The signer each assigned miner accepted the task with, in assignment order: the key its commitment
        must be signed by, and a party to the task's disputes, whatever the miner registers later."""
        return list(self.contract.functions.signersOf(task_id).call())

    def signed_mask_of(self, task_id: int) -> int:
        """Bit i set: assigned miner i signed the committed results."""
        return int(self.contract.functions.signedMaskOf(task_id).call())

    def served_roots_of(self, task_id: int) -> list[bytes]:
        """The served root each assigned miner signed, in assignment order."""
        return [bytes(root) for root in self.contract.functions.servedRootsOf(task_id).call()]

    def accountable_for(
        self, leaf: ResultLeaf, proof: Sequence[bytes], served_proofs: Sequence[Sequence[bytes]]
    ) -> list[str]:
        """The miners a dispute of `leaf` would hold to account: the contract's own check, the one
        `open_dispute` applies (ContractRevert when the leaf is not the committed one at its position, or no
        miner vouched for it)."""
        call = self.contract.functions.accountableFor(
            leaf.task_id, *_leaf_with_proofs(leaf, proof, served_proofs)
        )
        _, accountable = call_view(call)
        return list(accountable)

    def commit_results(self, commitment: ResultCommitment, signatures: Sequence[bytes]) -> TxReceipt:
        """Commits the results with one signature per assigned miner (empty where the miner's on-chain vouch
        stands in, or for a miner paid nothing when a coordinator commits)."""
        call = self.contract.functions.commitResults(
            commitment.task_id, commitment.as_tuple(), list(signatures)
        )
        return self._send(call)

    def refute_usage(self, leaf: ResultLeaf, proof: Sequence[bytes]) -> TxReceipt:
        """Proves with `leaf` and its results proof that the task's committed usage is not what its results
        tree adds up to (ContractRevert `UsageMatches` when it is): the owner is refunded in full and every
        miner that signed the commitment loses its stake lock to the audit pool."""
        return self._send(self.contract.functions.refuteUsage(leaf.task_id, leaf.as_tuple(), list(proof)))

    def finalize_task(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.finalizeTask(task_id))

    def expire_task(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.expireTask(task_id))


class VerifierRegistry(_StakeRegistry):
    """Verifiers' stake and their weight in jury draws: one unit of weight, one jury seat, per `min_stake`
    (the stake a seat locks), in the pool of each model (checkpoint hash) the verifier judges. A dispute
    draws its jurors from its task's model's pool."""

    abi_name = "VerifierRegistry"

    def is_verifier(self, account: str) -> bool:
        """Registered, with stake, and not exiting."""
        return bool(self.contract.functions.isVerifier(account).call())

    def verifier_of(self, account: str) -> Verifier:
        return from_abi(Verifier, self.contract.functions.verifierOf(account).call())

    def registered_between(self, from_block: int, to_block: int) -> list[str]:
        """Every address that registered as a verifier in blocks `from_block` to `to_block` (inclusive; its
        VerifierRegistered events), in registration order; exited ones too."""
        events = self.contract.events.VerifierRegistered().get_logs(from_block=from_block, to_block=to_block)
        return [str(event["args"]["verifier"]) for event in events]

    def total_weight(self, model: bytes) -> int:
        """The weight of `model`'s pool now: the seats of stake of the verifiers that judge it."""
        return int(self.contract.functions.totalWeight(model).call())

    def judges(self, account: str, model: bytes) -> bool:
        """Whether `account` is an active verifier in `model`'s pool."""
        return bool(self.contract.functions.judges(account, model).call())

    def models_of(self, account: str) -> list[bytes]:
        """The models `account` judges."""
        return [bytes(m) for m in self.contract.functions.modelsOf(account).call()]

    def max_models(self) -> int:
        """Most models one verifier judges."""
        return int(self.contract.functions.MAX_MODELS().call())

    def register(self, stake: int, models: Sequence[bytes]) -> TxReceipt:
        """Stakes `stake` (approved to this contract) to judge `models` (checkpoint hashes); drawable for
        rounds of those models opened from the next transaction on. An address registers once."""
        return self._send(self.contract.functions.register(stake, list(models)))

    def add_model(self, model: bytes) -> TxReceipt:
        """Joins `model`'s pool too, with the stake's weight now (an active verifier)."""
        return self._send(self.contract.functions.addModel(model))

    def remove_model(self, model: bytes) -> TxReceipt:
        """Leaves `model`'s pool: rounds of it opened from now on no longer draw this verifier."""
        return self._send(self.contract.functions.removeModel(model))

    def request_exit(self) -> TxReceipt:
        return self._send(self.contract.functions.requestExit())

    def withdraw(self) -> TxReceipt:
        return self._send(self.contract.functions.withdraw())

    def needs_reweigh(self, account: str) -> bool:
        """Whether penalties left `account` less stake than one of its pools' weights was set with."""
        return bool(self.contract.functions.needsReweigh(account).call())

    def reweigh(self, account: str) -> TxReceipt:
        """Lowers `account`'s weight in each of its pools to what its stake backs now (anyone may): weight
        without stake behind it loses every draw that lands on it, so juries come up short."""
        return self._send(self.contract.functions.reweigh(account))


class Randomness(_Bound):
    """The random values juries and audits draw from: a past block's `prevrandao`, proven from its header."""

    abi_name = "BlockRandomness"

    def value_of(self, block_number: int) -> bytes:
        """Block `block_number`'s proven random value; 32 zero bytes while it is not proven."""
        return bytes(self.contract.functions.valueOf(block_number).call())

    def is_expired(self, block_number: int) -> bool:
        """Whether block `block_number`'s value can no longer be proven (its hash is gone)."""
        return bool(self.contract.functions.isExpired(block_number).call())

    def prove(self, block_number: int) -> bytes:
        """Makes block `block_number`'s random value known on-chain, from its header as the node serves it
        (anyone, once the block exists and within 256 blocks of it); returns the value."""
        value = self.value_of(block_number)
        if any(value):
            return value
        # A block not mined yet has no header: the contract's refusal (HeaderUnavailable) says so. The latest
        # block's can be proven: the proof lands in a later block.
        mined = block_number <= self.w3.eth.block_number
        header = header_rlp(self.w3.eth.get_block(block_number)) if mined else b""
        self._send(self.contract.functions.prove(block_number, header))
        return self.value_of(block_number)


class _Seeded(_Bound):
    """A contract whose draws take their seeds from `randomness` (it proves a seed block before drawing)."""

    def __init__(self, w3: Web3, address: str, transactor: Transactor | None, randomness: Randomness) -> None:
        super().__init__(w3, address, transactor)
        self.randomness = randomness


class Arbitration(_Seeded):
    abi_name = "Arbitration"

    def config(self) -> ArbitrationConfig:
        """The configuration for tasks created from now on."""
        return from_abi(ArbitrationConfig, self.contract.functions.config().call())

    def set_config_call(self, config: ArbitrationConfig) -> ContractFunction:
        """The admin call that sets the configuration for tasks created from then on; the admin role sits with
        the timelock, so schedule it there (`Market.timelock`)."""
        return self.contract.functions.setConfig(to_abi(config))

    def config_of(self, task_id: int) -> ArbitrationConfig:
        """The configuration task `task_id` lives under (the one in force when it was created)."""
        return from_abi(ArbitrationConfig, self.contract.functions.configOf(task_id).call())

    def get_dispute(self, dispute_id: int) -> Dispute:
        return from_abi(Dispute, self.contract.functions.getDispute(dispute_id).call())

    def round_of(self, dispute_id: int, round_index: int) -> Round:
        return from_abi(Round, self.contract.functions.roundOf(dispute_id, round_index).call())

    def pipeline_of(self, dispute_id: int) -> list[str]:
        """The disputed leaf's pipeline: the miners it names."""
        return list(self.contract.functions.pipelineOf(dispute_id).call())

    def jurors_of(self, dispute_id: int, round_index: int) -> list[str]:
        return list(self.contract.functions.jurorsOf(dispute_id, round_index).call())

    def juror_of(self, dispute_id: int, round_index: int, account: str) -> Juror:
        return from_abi(Juror, self.contract.functions.jurorOf(dispute_id, round_index, account).call())

    def dispute_count(self) -> int:
        """Disputes opened so far; ids run from 1 to this."""
        return int(self.contract.functions.disputeCount().call())

    def dispute_of_task(self, task_id: int) -> int:
        """The id of the task owner's dispute of the task, 0 if none (an owner disputes one line per task; an
        audit's dispute is `audit_of(task_id).dispute_id`)."""
        return int(self.contract.functions.disputeOfTask(task_id).call())

    def resolutions_between(self, dispute_id: int, from_block: int, to_block: int) -> list[Resolution]:
        """What dispute `dispute_id` moved when it was resolved, if that was in blocks `from_block` to
        `to_block` (inclusive; its DisputeResolved event): one item, or none."""
        events = self.contract.events.DisputeResolved().get_logs(
            from_block=from_block, to_block=to_block, argument_filters={"disputeId": dispute_id}
        )
        return [
            Resolution(
                DisputeStatus(event["args"]["outcome"]),
                int(event["args"]["slashed"]),
                int(event["args"]["jurorRewards"]),
                int(event["args"]["penalties"]),
                int(event["blockNumber"]),
            )
            for event in events
        ]

    def vote_commitment(
        self, dispute_id: int, round_index: int, juror: str, choice: Vote, salt: bytes
    ) -> bytes:
        """The sealed vote a juror commits: keccak256 of the ABI encoding, as the contract computes it."""
        call = self.contract.functions.voteCommitment(dispute_id, round_index, juror, int(choice), salt)
        return bytes(call.call())

    def open_dispute(
        self, leaf: ResultLeaf, proof: Sequence[bytes], served_proofs: Sequence[Sequence[bytes]]
    ) -> int:
        """Disputes `leaf` (the task owner, with the bond approved to the escrow): `proof` places it in the
        results, `served_proofs[k]` in the served root of its k-th pipeline miner."""
        call = self.contract.functions.openDispute(
            leaf.task_id, *_leaf_with_proofs(leaf, proof, served_proofs)
        )
        receipt = self._send(call)
        (event,) = self.contract.events.DisputeOpened().process_receipt(receipt, errors=DISCARD)
        return int(event["args"]["disputeId"])

    def draw_jury(self, dispute_id: int) -> TxReceipt:
        """Anyone, once the current round's seed block exists and before its drawing phase ends: proves the
        seed block's random value if nobody has, then draws."""
        record = self.get_dispute(dispute_id)
        self.randomness.prove(self.round_of(dispute_id, record.round).seed_block)
        return self._send(self.contract.functions.drawJury(dispute_id))

    def commit_vote(self, dispute_id: int, commitment: bytes) -> TxReceipt:
        return self._send(self.contract.functions.commitVote(dispute_id, commitment))

    def reveal_vote(self, dispute_id: int, choice: Vote, salt: bytes) -> TxReceipt:
        return self._send(self.contract.functions.revealVote(dispute_id, int(choice), salt))

    def appeal(self, dispute_id: int) -> TxReceipt:
        """A party on the losing side of the current round, with twice its bond approved to the escrow."""
        return self._send(self.contract.functions.appeal(dispute_id))

    def resolve(self, dispute_id: int) -> DisputeStatus:
        receipt = self._send(self.contract.functions.resolve(dispute_id))
        (event,) = self.contract.events.DisputeResolved().process_receipt(receipt, errors=DISCARD)
        return DisputeStatus(event["args"]["outcome"])

    def join_dispute(
        self,
        dispute_id: int,
        leaf: ResultLeaf,
        proof: Sequence[bytes],
        served_proofs: Sequence[Sequence[bytes]],
    ) -> list[str]:
        """Adds to open dispute `dispute_id` every miner of `leaf`'s pipeline that `served_proofs` shows
        accountable and its opener left out (anyone may); returns the miners added."""
        call = self.contract.functions.joinDispute(dispute_id, *_leaf_with_proofs(leaf, proof, served_proofs))
        receipt = self._send(call)
        events = self.contract.events.MinerJoined().process_receipt(receipt, errors=DISCARD)
        return [str(event["args"]["miner"]) for event in events]


class Audits(_Seeded):
    """Random audits: anyone draws a committed task's audit and seals it; a verifier opens the selected line's
    dispute (in Arbitration), staking one seat until the audit is settled."""

    abi_name = "Audits"

    def audit_of(self, task_id: int) -> Audit:
        return from_abi(Audit, self.contract.functions.auditOf(task_id).call())

    def fund_audit_pool(self, amount: int) -> TxReceipt:
        """Adds to the audit pool (the caller must have approved the escrow for `amount`)."""
        return self._send(self.contract.functions.fundAuditPool(amount))

    def draw_audit(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.drawAudit(task_id))

    def seal_audit(self, task_id: int) -> Audit:
        """Seals the drawn audit once its seed block exists (proving the block's random value if nobody has);
        returns the audit as it is then: final, or drawn again (forced selected) when its seed had expired."""
        seed_block = self.audit_of(task_id).seed_block
        if seed_block and not self.randomness.is_expired(seed_block):
            self.randomness.prove(seed_block)
        self._send(self.contract.functions.sealAudit(task_id))
        return self.audit_of(task_id)

    def open_audit(
        self, leaf: ResultLeaf, proof: Sequence[bytes], served_proofs: Sequence[Sequence[bytes]]
    ) -> int:
        """Opens the audit of the selected line (as an active verifier that is not a party of the task, with a
        free seat of stake); returns the dispute id."""
        call = self.contract.functions.openAudit(leaf.task_id, *_leaf_with_proofs(leaf, proof, served_proofs))
        receipt = self._send(call)
        (event,) = self.contract.events.AuditOpened().process_receipt(receipt, errors=DISCARD)
        return int(event["args"]["disputeId"])

    def settle_audit(self, task_id: int) -> int:
        """Anyone, once the audit's dispute is resolved: frees the opener's seat; returns the penalty it paid
        to the audit pool (non-zero only when the miners were found correct or the jury was never drawn)."""
        receipt = self._send(self.contract.functions.settleAudit(task_id))
        (event,) = self.contract.events.AuditSettled().process_receipt(receipt, errors=DISCARD)
        return int(event["args"]["penalty"])


class LineChallenges(_Bound):
    """The owner's challenges of positions of its task's results tree, which anyone answers with the line's
    leaf and proofs; one nobody answers in time refunds the task and slashes its signers."""

    abi_name = "LineChallenges"

    def answer_period(self) -> int:
        return int(self.contract.functions.answerPeriod().call())

    def challenge_of(self, task_id: int, index: int) -> Challenge:
        return from_abi(Challenge, self.contract.functions.challengeOf(task_id, index).call())

    def challenged_lines_of(self, task_id: int) -> list[int]:
        """Every position of task `task_id` its owner challenged, in the order it did."""
        return [int(i) for i in self.contract.functions.challengedLinesOf(task_id).call()]

    def open_challenges(self, task_id: int) -> list[int]:
        """The positions of task `task_id` whose challenge waits for an answer."""
        return [
            index
            for index in self.challenged_lines_of(task_id)
            if self.challenge_of(task_id, index).status == ChallengeStatus.OPEN
        ]

    def challenge_line(self, task_id: int, index: int) -> TxReceipt:
        """The task's owner, inside its challenge window: position `index` must be answered in time."""
        return self._send(self.contract.functions.challengeLine(task_id, index))

    def answer_line(
        self, leaf: ResultLeaf, proof: Sequence[bytes], served_proofs: Sequence[Sequence[bytes]]
    ) -> TxReceipt:
        """Answers the open challenge of `leaf`'s position with its results proof and, for each miner of its
        pipeline, its proof in that miner's served tree (as a dispute is opened)."""
        call = self.contract.functions.answerLine(
            leaf.task_id, *_leaf_with_proofs(leaf, proof, served_proofs)
        )
        return self._send(call)

    def answer_from(self, trees: ResultTrees, lines: Sequence[int]) -> dict[int, str | None]:
        """Answers the challenges of `lines` with the leaves and proofs of `trees` (a task's whole results
        tree); for each line, None if answered, else why not (no such line, or the contract's refusal:
        someone answered first, the period ran out)."""
        outcome: dict[int, str | None] = {}
        for index in lines:
            if index >= len(trees.leaves):
                outcome[index] = f"the results have no line {index}"
                continue
            try:
                self.answer_line(trees.leaves[index], trees.proof(index), trees.served_proofs(index))
            except ContractRevert as exc:
                outcome[index] = str(exc)
            else:
                outcome[index] = None
        return outcome

    def settle_unanswered(self, task_id: int, index: int) -> TxReceipt:
        """Anyone, after the answer period of an open challenge: refunds the owner, slashes the signers."""
        return self._send(self.contract.functions.settleUnanswered(task_id, index))


class Timelock(_Bound):
    """The timelock that holds every protocol contract's admin role: the admin schedules a call, anyone can
    see it (CallScheduled), and it runs only after the delay."""

    abi_name = "TimelockController"
    NO_PREDECESSOR = bytes(32)

    def min_delay(self) -> int:
        return int(self.contract.functions.getMinDelay().call())

    def schedule(self, call: ContractFunction, salt: bytes = bytes(32)) -> TxReceipt:
        """Schedules `call` (a bound contract function, not sent) to run after the delay."""
        target, data = call.address, call._encode_transaction_data()
        operation = self.contract.functions.schedule(
            target, 0, data, self.NO_PREDECESSOR, salt, self.min_delay()
        )
        return self._send(operation)

    def execute(self, call: ContractFunction, salt: bytes = bytes(32)) -> TxReceipt:
        """Runs a scheduled `call` once its delay has passed."""
        target, data = call.address, call._encode_transaction_data()
        return self._send(self.contract.functions.execute(target, 0, data, self.NO_PREDECESSOR, salt))


class Market:
    """All contracts of one deployment, bound to one Web3 connection and (optionally) one signing key."""

    def __init__(
        self,
        w3: Web3,
        deployment: Deployment,
        account: LocalAccount | None = None,
        shared: SendingLock | None = None,
    ) -> None:
        self.w3 = w3
        self.deployment = deployment
        self.shared = shared
        self.transactor = Transactor(w3, account, shared) if account is not None else None
        self.token = Token(w3, deployment.token, self.transactor)
        self.registry = GPURegistry(w3, deployment.gpu_registry, self.transactor)
        self.escrow = PaymentEscrow(w3, deployment.payment_escrow, self.transactor)
        self.tasks = TaskRegistry(w3, deployment.task_registry, self.transactor)
        self.verifiers = VerifierRegistry(w3, deployment.verifier_registry, self.transactor)
        self.randomness = Randomness(w3, deployment.randomness, self.transactor)
        self.arbitration = Arbitration(w3, deployment.arbitration, self.transactor, self.randomness)
        self.audits = Audits(w3, deployment.audits, self.transactor, self.randomness)
        self.challenges = LineChallenges(w3, deployment.line_challenges, self.transactor)
        self.timelock = Timelock(w3, deployment.timelock, self.transactor)

    @property
    def address(self) -> str:
        """The signing account's address."""
        if self.transactor is None:
            raise UserError("this action needs a key: set BATCHMARKET_PRIVATE_KEY or pass --keystore")
        return self.transactor.address

    def amount(self, base_units: int) -> str:
        """An amount of the payment token for people: six decimals and the token's symbol."""
        return f"{format_amount(base_units)} {self.token.symbol}"

    def chain_time(self) -> int:
        """The latest block's timestamp, which deadlines, windows and unbonding periods are measured in."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def as_account(self, account: LocalAccount) -> Market:
        """The same deployment, signing as another account."""
        return Market(self.w3, self.deployment, account, self.shared)

    def holds(self) -> int:
        """What the signing account can pay with: its wallet's tokens and its escrow balance."""
        return self.token.balance_of(self.address) + self.escrow.balance_of(self.address)

    def appeal_bond_refusal(self, task_id: int, bond: int, max_bond: int | None) -> str | None:
        """Why a daemon does not post `bond` to appeal a round of task `task_id`'s dispute, or None: the bond
        is above its bound (`max_bond`, by default the task's stake lock, which a conviction takes), or more
        than its wallet and escrow balance hold."""
        bound = self.tasks.get_task(task_id).stake_lock if max_bond is None else max_bond
        if bond > bound:
            return f"the bond of {self.amount(bond)} is above the bound of {self.amount(bound)}"
        held = self.holds()
        if held < bond:
            return f"the wallet and its escrow balance hold {self.amount(held)}, not the bond"
        return None

    def appeal_paying(self, dispute_id: int, bond: int) -> None:
        """Appeals `dispute_id` for `bond` out of the wallet, withdrawing the escrow balance into it first
        when the wallet alone holds too little (a daemon's earnings pay its appeals)."""
        me = self.address
        if self.token.balance_of(me) < bond:
            self.escrow.withdraw()
        with self.token.allowing(me, self.escrow.address, bond):
            self.arbitration.appeal(dispute_id)


def connect(
    rpc_url: str,
    deployment_file: Path,
    account: LocalAccount | None = None,
    shared: SendingLock | None = None,
) -> Market:
    """Opens the deployment at `rpc_url`, checking that the RPC answers and is on the deployment's chain;
    `shared` serializes sends with other processes that sign with the same key."""
    deployment = Deployment.load(deployment_file)
    w3, chain_id = open_rpc(rpc_url)
    if chain_id != deployment.chain_id:
        raise ChainError(
            f"wrong chain: the RPC at {rpc_url} is chain {chain_id}, "
            f"but {deployment_file} is a deployment on chain {deployment.chain_id}"
        )
    if not w3.eth.get_code(Web3.to_checksum_address(deployment.task_registry)):
        raise ChainError(f"no contract at the task registry address in {deployment_file} on chain {chain_id}")
    return Market(w3, deployment, account, shared)
