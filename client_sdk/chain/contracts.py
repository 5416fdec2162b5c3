"""Typed wrappers over the deployed contracts. Reads need only a Web3; writes need a Transactor."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractFunction
from web3.logs import DISCARD
from web3.types import TxReceipt

from client_sdk.abis import load_abi
from client_sdk.chain.deployment import Deployment
from client_sdk.chain.rpc import open_rpc
from client_sdk.chain.transactions import Transactor
from client_sdk.chain.types import Audit, Dispute, DisputeStatus, MinerProfile, Stake, Task, Verifier, Vote
from client_sdk.eip712 import ResultCommitment
from client_sdk.errors import ChainError, UserError
from client_sdk.results import ResultLeaf


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


class Token(_Bound):
    abi_name = "MockStablecoin"

    def balance_of(self, account: str) -> int:
        return int(self.contract.functions.balanceOf(account).call())

    def allowance(self, owner: str, spender: str) -> int:
        return int(self.contract.functions.allowance(owner, spender).call())

    def approve(self, spender: str, amount: int) -> TxReceipt:
        return self._send(self.contract.functions.approve(spender, amount))

    def allow(self, owner: str, spender: str, amount: int) -> None:
        """Lets `spender` pull `amount` of `owner`'s tokens (`owner` signs), approving only if the allowance
        falls short."""
        if self.allowance(owner, spender) < amount:
            self.approve(spender, amount)

    def transfer(self, to: str, amount: int) -> TxReceipt:
        return self._send(self.contract.functions.transfer(to, amount))

    def mint(self, to: str, amount: int) -> TxReceipt:
        """Devnet only: needs the mock token's minter role."""
        return self._send(self.contract.functions.mint(to, amount))


class GPURegistry(_Bound):
    abi_name = "GPURegistry"

    def min_stake(self) -> int:
        return int(self.contract.functions.minStake().call())

    def unbonding_period(self) -> int:
        return int(self.contract.functions.unbondingPeriod().call())

    def is_registered(self, miner: str) -> bool:
        return bool(self.contract.functions.isRegistered(miner).call())

    def profile_of(self, miner: str) -> MinerProfile:
        return MinerProfile.from_tuple(self.contract.functions.profileOf(miner).call())

    def stake_of(self, miner: str) -> Stake:
        return Stake(*self.contract.functions.stakeOf(miner).call())

    def register(self, profile: MinerProfile, stake: int) -> TxReceipt:
        return self._send(self.contract.functions.register(profile.as_tuple(), stake))

    def add_stake(self, amount: int) -> TxReceipt:
        return self._send(self.contract.functions.addStake(amount))

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

    def withdraw(self) -> TxReceipt:
        return self._send(self.contract.functions.withdraw())


class TaskRegistry(_Bound):
    abi_name = "TaskRegistry"

    def get_task(self, task_id: int) -> Task:
        return Task.from_tuple(self.contract.functions.getTask(task_id).call())

    def task_count(self) -> int:
        """Tasks created so far; ids run from 1 to this."""
        return int(self.contract.functions.taskCount().call())

    def miners_of(self, task_id: int) -> list[str]:
        return list(self.contract.functions.minersOf(task_id).call())

    def challenge_window(self) -> int:
        return int(self.contract.functions.challengeWindow().call())

    def min_stake_lock(self) -> int:
        return int(self.contract.functions.minStakeLock().call())

    def miner_amounts_of(self, task_id: int) -> list[int]:
        return [int(a) for a in self.contract.functions.minerAmountsOf(task_id).call()]

    def coordinator_fee_bps(self) -> int:
        return int(self.contract.functions.coordinatorFeeBps().call())

    def commitment_digest(self, commitment: ResultCommitment) -> bytes:
        call = self.contract.functions.commitmentDigest(commitment.task_id, commitment.as_tuple())
        return bytes(call.call())

    def create_task(
        self,
        model_id: bytes,
        input_root: bytes,
        request_count: int,
        params_hash: bytes,
        max_price: int,
        deadline: int,
    ) -> int:
        """Creates the task (the caller must have approved the escrow for max_price); returns its id."""
        params = (model_id, input_root, request_count, params_hash, max_price, deadline)
        receipt = self._send(self.contract.functions.createTask(params))
        (event,) = self.contract.events.TaskCreated().process_receipt(receipt, errors=DISCARD)
        return int(event["args"]["taskId"])

    def cancel_task(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.cancelTask(task_id))

    def assign_task(self, task_id: int, miners: Sequence[str], stake_lock: int) -> TxReceipt:
        return self._send(self.contract.functions.assignTask(task_id, list(miners), stake_lock))

    def commit_results(self, commitment: ResultCommitment, signatures: Sequence[bytes]) -> TxReceipt:
        call = self.contract.functions.commitResults(
            commitment.task_id, commitment.as_tuple(), list(signatures)
        )
        return self._send(call)

    def finalize_task(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.finalizeTask(task_id))

    def expire_task(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.expireTask(task_id))


class Arbitration(_Bound):
    abi_name = "Arbitration"

    def dispute_bond(self) -> int:
        return int(self.contract.functions.disputeBond().call())

    def verify_leaf(self, results_root: bytes, leaf: ResultLeaf, proof: Sequence[bytes]) -> bool:
        """The contract's own inclusion check, the one `open_dispute` applies."""
        return bool(self.contract.functions.verifyLeaf(results_root, leaf.as_tuple(), list(proof)).call())

    def get_dispute(self, dispute_id: int) -> Dispute:
        return Dispute.from_tuple(self.contract.functions.getDispute(dispute_id).call())

    def dispute_count(self) -> int:
        """Disputes opened so far; ids run from 1 to this."""
        return int(self.contract.functions.disputeCount().call())

    def dispute_of_task(self, task_id: int) -> int:
        """The id of the task's dispute, 0 if it never had one (a task is disputed at most once)."""
        return int(self.contract.functions.disputeOfTask(task_id).call())

    def open_dispute(self, leaf: ResultLeaf, proof: Sequence[bytes]) -> int:
        call = self.contract.functions.openDispute(leaf.task_id, leaf.as_tuple(), list(proof))
        receipt = self._send(call)
        (event,) = self.contract.events.DisputeOpened().process_receipt(receipt, errors=DISCARD)
        return int(event["args"]["disputeId"])

    def vote_of(self, dispute_id: int, verifier: str) -> Vote:
        return Vote(self.contract.functions.voteOf(dispute_id, verifier).call())

    def vote(self, dispute_id: int, choice: Vote) -> TxReceipt:
        """Only a verifier registered in a block before the dispute's (and not exiting by then)."""
        return self._send(self.contract.functions.vote(dispute_id, int(choice)))

    def resolve(self, dispute_id: int) -> DisputeStatus:
        receipt = self._send(self.contract.functions.resolve(dispute_id))
        (event,) = self.contract.events.DisputeResolved().process_receipt(receipt, errors=DISCARD)
        return DisputeStatus(event["args"]["outcome"])

    # -- staked verifiers

    def min_verifier_stake(self) -> int:
        return int(self.contract.functions.minVerifierStake().call())

    def verifier_unbonding_period(self) -> int:
        return int(self.contract.functions.verifierUnbondingPeriod().call())

    def is_verifier(self, account: str) -> bool:
        """Registered and not exiting."""
        return bool(self.contract.functions.isVerifier(account).call())

    def verifier_of(self, account: str) -> Verifier:
        return Verifier(*self.contract.functions.verifierOf(account).call())

    def register_verifier(self, stake: int) -> TxReceipt:
        """Stakes `stake` (the caller must have approved this contract for it); it votes on disputes opened
        from the next block on."""
        return self._send(self.contract.functions.registerVerifier(stake))

    def request_verifier_exit(self) -> TxReceipt:
        return self._send(self.contract.functions.requestVerifierExit())

    def withdraw_verifier_stake(self) -> TxReceipt:
        return self._send(self.contract.functions.withdrawVerifierStake())

    # -- random audits

    def audit_rate_bps(self) -> int:
        return int(self.contract.functions.auditRateBps().call())

    def set_audit_rate(self, bps: int) -> TxReceipt:
        """Admin only: the share of drawn tasks audited, in basis points (0 stops new draws)."""
        return self._send(self.contract.functions.setAuditRate(bps))

    def audit_of(self, task_id: int) -> Audit:
        return Audit.from_tuple(self.contract.functions.auditOf(task_id).call())

    def fund_audit_pool(self, amount: int) -> TxReceipt:
        """Adds to the audit pool (the caller must have approved the escrow for `amount`)."""
        return self._send(self.contract.functions.fundAuditPool(amount))

    def draw_audit(self, task_id: int) -> TxReceipt:
        return self._send(self.contract.functions.drawAudit(task_id))

    def seal_audit(self, task_id: int) -> Audit:
        """Seals the drawn audit's seed (from the block after the draw on); returns the sealed draw."""
        self._send(self.contract.functions.sealAudit(task_id))
        return self.audit_of(task_id)

    def open_audit(self, leaf: ResultLeaf, proof: Sequence[bytes]) -> int:
        """Opens the audit of the selected line (as an active verifier); returns the dispute id."""
        call = self.contract.functions.openAudit(leaf.task_id, leaf.as_tuple(), list(proof))
        receipt = self._send(call)
        (event,) = self.contract.events.DisputeOpened().process_receipt(receipt, errors=DISCARD)
        return int(event["args"]["disputeId"])


class Market:
    """All contracts of one deployment, bound to one Web3 connection and (optionally) one signing key."""

    def __init__(self, w3: Web3, deployment: Deployment, account: LocalAccount | None = None) -> None:
        self.w3 = w3
        self.deployment = deployment
        self.transactor = Transactor(w3, account) if account is not None else None
        self.token = Token(w3, deployment.token, self.transactor)
        self.registry = GPURegistry(w3, deployment.gpu_registry, self.transactor)
        self.escrow = PaymentEscrow(w3, deployment.payment_escrow, self.transactor)
        self.tasks = TaskRegistry(w3, deployment.task_registry, self.transactor)
        self.arbitration = Arbitration(w3, deployment.arbitration, self.transactor)

    @property
    def address(self) -> str:
        """The signing account's address."""
        if self.transactor is None:
            raise UserError("this action needs a key: set BATCHMARKET_PRIVATE_KEY or pass --keystore")
        return self.transactor.address

    def chain_time(self) -> int:
        """The latest block's timestamp, which deadlines, windows and unbonding periods are measured in."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def as_account(self, account: LocalAccount) -> Market:
        """The same deployment, signing as another account."""
        return Market(self.w3, self.deployment, account)


def connect(rpc_url: str, deployment_file: Path, account: LocalAccount | None = None) -> Market:
    """Opens the deployment at `rpc_url`, checking that the RPC answers and is on the deployment's chain."""
    deployment = Deployment.load(deployment_file)
    w3, chain_id = open_rpc(rpc_url)
    if chain_id != deployment.chain_id:
        raise ChainError(
            f"wrong chain: the RPC at {rpc_url} is chain {chain_id}, "
            f"but {deployment_file} is a deployment on chain {deployment.chain_id}"
        )
    if not w3.eth.get_code(Web3.to_checksum_address(deployment.task_registry)):
        raise ChainError(f"no contract at the task registry address in {deployment_file} on chain {chain_id}")
    return Market(w3, deployment, account)
