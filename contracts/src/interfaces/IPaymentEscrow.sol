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
    error PayoutExceedsBond(uint256 payout, uint256 bond);
    error EscrowAlreadyFunded(uint256 taskId);
    error BondAlreadyPosted(uint256 disputeId);
    error UnbackedCredit(uint256 amount, uint256 surplus);
    error NothingToWithdraw(address account);
    error AuditPoolTooSmall(uint256 pool, uint256 amount);

    event EscrowDeposited(uint256 indexed taskId, address indexed payer, uint256 amount);
    event EscrowSettled(uint256 indexed taskId, uint256 paidOut, address indexed refundTo, uint256 refund);
    event BondDeposited(uint256 indexed disputeId, address indexed payer, uint256 amount);
    event BondSettled(
        uint256 indexed disputeId, uint256 paidOut, address indexed remainderTo, uint256 remainder
    );
    event Credited(address indexed account, uint256 amount);
    event Withdrawn(address indexed account, uint256 amount);
    event AuditPoolFunded(address indexed payer, uint256 amount);
    event AuditBondPosted(uint256 indexed disputeId, uint256 amount);
    event AuditBondReturned(uint256 indexed disputeId, uint256 amount);

    function depositEscrow(uint256 taskId, address payer, uint256 amount) external;
    function settleEscrow(
        uint256 taskId,
        address[] calldata payees,
        uint256[] calldata amounts,
        address refundTo
    ) external;
    function depositBond(uint256 disputeId, address payer, uint256 amount) external;
    function settleBond(
        uint256 disputeId,
        address[] calldata payees,
        uint256[] calldata amounts,
        address remainderTo
    ) external;
    function creditReceived(address[] calldata payees, uint256[] calldata amounts) external;
    /// @notice Pulls `amount` from `payer` into the audit pool.
    function fundAuditPool(address payer, uint256 amount) external;
    /// @notice Posts dispute `disputeId`'s bond out of the audit pool; `settleBond` or `returnBondToAuditPool`
    /// settles it.
    function depositBondFromAuditPool(uint256 disputeId, uint256 amount) external;
    /// @notice Puts dispute `disputeId`'s whole bond back into the audit pool.
    function returnBondToAuditPool(uint256 disputeId) external returns (uint256 amount);
    function withdraw() external returns (uint256 amount);

    function escrowOf(uint256 taskId) external view returns (uint256);
    function bondOf(uint256 disputeId) external view returns (uint256);
    function balanceOf(address account) external view returns (uint256);
    function totalLiabilities() external view returns (uint256);
    /// @notice Tokens in the audit pool, owed to future audit bonds (part of `totalLiabilities`).
    function auditPool() external view returns (uint256);
    function token() external view returns (IERC20);
}
