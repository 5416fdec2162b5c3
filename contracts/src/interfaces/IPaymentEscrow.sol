// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @title IPaymentEscrow
/// @notice Holds task escrows, dispute bonds and the audit pool, and the pull-payment balances they settle into.
/// `withdraw` is the only way money leaves.
interface IPaymentEscrow {
    error ZeroAddress();
    error ZeroAmount();
    error LengthMismatch(uint256 payees, uint256 amounts);
    error PayoutExceedsEscrow(uint256 payout, uint256 escrow);
    error PayoutExceedsFloat(uint256 payout, uint256 float);
    error TransferShortfall(uint256 expected, uint256 received);
    error EscrowAlreadyFunded(uint256 taskId);
    error BondAlreadyPosted(uint256 disputeId);
    error NothingToWithdraw(address account);
    error AuditPoolTooSmall(uint256 pool, uint256 amount);

    event EscrowDeposited(uint256 indexed taskId, address indexed payer, uint256 amount);
    event EscrowSettled(uint256 indexed taskId, uint256 paidOut, address indexed refundTo, uint256 refund);
    event BondDeposited(uint256 indexed disputeId, address indexed payer, uint256 amount);
    event BondReleased(uint256 indexed bondId, uint256 amount);
    event Absorbed(uint256 amount);
    event Distributed(uint256 paidOut, uint256 toAuditPool);
    event Credited(address indexed account, uint256 amount);
    event Withdrawn(address indexed account, uint256 amount);
    event AuditPoolFunded(address indexed payer, uint256 amount);
    event AuditPoolSpent(address indexed to, uint256 amount);
    event AuditBondPosted(uint256 indexed disputeId, uint256 amount);

    /// @notice The task registry takes `amount` from `payer` into a task's escrow.
    function depositEscrow(uint256 taskId, address payer, uint256 amount) external;
    /// @notice The task registry pays a task's escrow out to its payees and refunds the rest.
    function settleEscrow(
        uint256 taskId,
        address[] calldata payees,
        uint256[] calldata amounts,
        address refundTo
    ) external;
    /// @notice Arbitration takes a dispute bond of `amount` from `payer`.
    function depositBond(uint256 disputeId, address payer, uint256 amount) external;
    /// @notice Moves bond `bondId` into the arbitration float, to be shared out by `distribute`.
    function releaseBond(uint256 bondId) external returns (uint256 amount);
    /// @notice Moves tokens received without a deposit (slashed stake, juror penalties) into the float.
    function absorbReceived() external returns (uint256 amount);
    /// @notice Moves tokens received without a deposit (stake slashed by a task's refutation) into the audit
    /// pool.
    function poolReceived() external returns (uint256 amount);
    /// @notice Credits `amounts` to `payees` out of the float; the rest of the float goes to the audit pool.
    function distribute(address[] calldata payees, uint256[] calldata amounts) external;
    /// @notice Pulls `amount` from `payer` into the audit pool.
    function fundAuditPool(address payer, uint256 amount) external;
    /// @notice Posts bond `bondId` out of the audit pool; `releaseBond` releases it.
    function depositBondFromAuditPool(uint256 bondId, uint256 amount) external;
    /// @notice The admin (the timelock: announced a delay ahead) credits `amount` of the audit pool to `to`; what
    /// nobody could be paid (dust, penalties with no coherent seat) would otherwise only ever accumulate there.
    function spendAuditPool(address to, uint256 amount) external;
    /// @notice Pays the caller its whole credited balance.
    function withdraw() external returns (uint256 amount);

    /// @notice What a task's escrow holds.
    function escrowOf(uint256 taskId) external view returns (uint256);
    /// @notice What a dispute bond holds.
    function bondOf(uint256 disputeId) external view returns (uint256);
    /// @notice What `account` can withdraw.
    function balanceOf(address account) external view returns (uint256);
    /// @notice Everything the escrow owes (escrows, bonds, balances, the audit pool): never more than it
    /// holds.
    function totalLiabilities() external view returns (uint256);
    /// @notice Tokens in the audit pool, owed to future audit bonds (part of `totalLiabilities`).
    function auditPool() external view returns (uint256);
    /// @notice Tokens a dispute's resolution is sharing out; 0 between transactions.
    function arbitrationFloat() external view returns (uint256);
    /// @notice The token every amount is in.
    function token() external view returns (IERC20);
}
