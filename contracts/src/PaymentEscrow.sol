// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IPaymentEscrow} from "./interfaces/IPaymentEscrow.sol";

/// @title PaymentEscrow
/// @notice Holds each task's maximum price and each dispute's bond until they settle into pull-payment balances,
/// and the audit pool that posts the bonds of random audits. Every token it holds is owed to someone:
/// `token.balanceOf(this) >= totalLiabilities` at all times, and the liabilities are the open escrows, the open
/// bonds, the withdrawable balances and the audit pool.
contract PaymentEscrow is IPaymentEscrow, AccessControl, ReentrancyGuard {
    using SafeERC20 for IERC20;

    /// @notice Role of the task registry: funds and settles task escrows.
    bytes32 public constant TASK_MANAGER_ROLE = keccak256("TASK_MANAGER_ROLE");
    /// @notice Role of the arbitration contract: posts and settles bonds, credits slashed stake, funds and draws on
    /// the audit pool.
    bytes32 public constant ARBITER_ROLE = keccak256("ARBITER_ROLE");

    /// @notice The payment token.
    IERC20 public immutable token;
    /// @inheritdoc IPaymentEscrow
    uint256 public totalLiabilities;

    mapping(uint256 taskId => uint256) public escrowOf;
    mapping(uint256 disputeId => uint256) public bondOf;
    mapping(address account => uint256) public balanceOf;
    /// @inheritdoc IPaymentEscrow
    uint256 public auditPool;
    /// @inheritdoc IPaymentEscrow
    uint256 public arbitrationFloat;

    /// @param token_ Payment token.
    /// @param admin Receives the admin role (grants the protocol roles).
    constructor(IERC20 token_, address admin) {
        if (address(token_) == address(0) || admin == address(0)) revert ZeroAddress();
        token = token_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
    }

    /// @inheritdoc IPaymentEscrow
    function depositEscrow(uint256 taskId, address payer, uint256 amount)
        external
        onlyRole(TASK_MANAGER_ROLE)
        nonReentrant
    {
        if (amount == 0) revert ZeroAmount();
        if (escrowOf[taskId] != 0) revert EscrowAlreadyFunded(taskId);
        escrowOf[taskId] = amount;
        totalLiabilities += amount;
        _pull(payer, amount);
        emit EscrowDeposited(taskId, payer, amount);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev Pays `amounts` to `payees` and the rest of the escrow to `refundTo`. Leaves the escrow empty, so a
    /// task can settle only once.
    function settleEscrow(
        uint256 taskId,
        address[] calldata payees,
        uint256[] calldata amounts,
        address refundTo
    ) external onlyRole(TASK_MANAGER_ROLE) {
        uint256 escrow = escrowOf[taskId];
        uint256 paid = _creditAll(payees, amounts);
        if (paid > escrow) revert PayoutExceedsEscrow(paid, escrow);
        uint256 refund = escrow - paid;
        escrowOf[taskId] = 0;
        _credit(refundTo, refund);
        emit EscrowSettled(taskId, paid, refundTo, refund);
    }

    /// @inheritdoc IPaymentEscrow
    function depositBond(uint256 disputeId, address payer, uint256 amount)
        external
        onlyRole(ARBITER_ROLE)
        nonReentrant
    {
        if (amount == 0) revert ZeroAmount();
        if (bondOf[disputeId] != 0) revert BondAlreadyPosted(disputeId);
        bondOf[disputeId] = amount;
        totalLiabilities += amount;
        _pull(payer, amount);
        emit BondDeposited(disputeId, payer, amount);
    }

    /// @inheritdoc IPaymentEscrow
    function fundAuditPool(address payer, uint256 amount) external onlyRole(ARBITER_ROLE) nonReentrant {
        if (amount == 0) revert ZeroAmount();
        auditPool += amount;
        totalLiabilities += amount;
        _pull(payer, amount);
        emit AuditPoolFunded(payer, amount);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev Moves money already held from the pool to the bond: liabilities do not change.
    function depositBondFromAuditPool(uint256 disputeId, uint256 amount) external onlyRole(ARBITER_ROLE) {
        if (amount == 0) revert ZeroAmount();
        if (bondOf[disputeId] != 0) revert BondAlreadyPosted(disputeId);
        uint256 pool = auditPool;
        if (pool < amount) revert AuditPoolTooSmall(pool, amount);
        auditPool = pool - amount;
        bondOf[disputeId] = amount;
        emit AuditBondPosted(disputeId, amount);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev Leaves the bond empty, so a bond is released only once. Liabilities do not change.
    function releaseBond(uint256 bondId) external onlyRole(ARBITER_ROLE) returns (uint256 amount) {
        amount = bondOf[bondId];
        bondOf[bondId] = 0;
        arbitrationFloat += amount;
        emit BondReleased(bondId, amount);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev Tokens sent here without a deposit (slashed stake, juror penalties) are the surplus of the balance
    /// over the liabilities; they become owed from now on.
    function absorbReceived() external onlyRole(ARBITER_ROLE) returns (uint256 amount) {
        amount = token.balanceOf(address(this)) - totalLiabilities;
        totalLiabilities += amount;
        arbitrationFloat += amount;
        emit Absorbed(amount);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev The task registry's counterpart of `absorbReceived`: it slashes straight into the escrow and pools
    /// the surplus in the same transaction, so the arbitration float is never touched. Not the refuter's nor the
    /// owner's: whoever could cash a refutation could frame a miner whose signer key it holds.
    function poolReceived() external onlyRole(TASK_MANAGER_ROLE) returns (uint256 amount) {
        amount = token.balanceOf(address(this)) - totalLiabilities;
        totalLiabilities += amount;
        auditPool += amount;
        emit AuditPoolFunded(msg.sender, amount);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev Callers bound the arrays (jury and pipeline limits). Whatever the float holds beyond the payouts
    /// goes to the audit pool, so nothing ever stays unassigned.
    function distribute(address[] calldata payees, uint256[] calldata amounts)
        external
        onlyRole(ARBITER_ROLE)
    {
        uint256 float = arbitrationFloat;
        uint256 paid = _creditAll(payees, amounts);
        if (paid > float) revert PayoutExceedsFloat(paid, float);
        arbitrationFloat = 0;
        uint256 rest = float - paid;
        auditPool += rest;
        emit Distributed(paid, rest);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev Moves money already owed from the pool to a balance: liabilities do not change.
    function spendAuditPool(address to, uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        uint256 pool = auditPool;
        if (pool < amount) revert AuditPoolTooSmall(pool, amount);
        auditPool = pool - amount;
        _credit(to, amount);
        emit AuditPoolSpent(to, amount);
    }

    /// @inheritdoc IPaymentEscrow
    /// @dev Never paused: money owed can always leave.
    function withdraw() external nonReentrant returns (uint256 amount) {
        amount = balanceOf[msg.sender];
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        balanceOf[msg.sender] = 0;
        totalLiabilities -= amount;
        token.safeTransfer(msg.sender, amount);
        emit Withdrawn(msg.sender, amount);
    }

    /// @dev Pulls exactly `amount` from `payer`: a token that delivers less (a fee on transfer) is refused, so
    /// the liabilities never exceed the balance.
    function _pull(address payer, uint256 amount) private {
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(payer, address(this), amount);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != amount) revert TransferShortfall(amount, received);
    }

    /// @dev Moves amounts into balances; the caller adjusts `totalLiabilities` when new money is involved.
    /// Callers bound the arrays (pipeline and voter limits).
    function _creditAll(address[] calldata payees, uint256[] calldata amounts)
        private
        returns (uint256 total)
    {
        if (payees.length != amounts.length) {
            revert LengthMismatch(payees.length, amounts.length);
        }
        for (uint256 i = 0; i < payees.length; ++i) {
            _credit(payees[i], amounts[i]);
            total += amounts[i];
        }
    }

    function _credit(address account, uint256 amount) private {
        if (amount == 0) return;
        if (account == address(0)) revert ZeroAddress();
        balanceOf[account] += amount;
        emit Credited(account, amount);
    }
}
