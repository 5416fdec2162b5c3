// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title IPaymentEscrow
/// @notice Holds task escrows and dispute bonds, and the pull-payment balances they settle into.
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

    event EscrowDeposited(uint256 indexed taskId, address indexed payer, uint256 amount);
    event EscrowSettled(uint256 indexed taskId, uint256 paidOut, address indexed refundTo, uint256 refund);
    event BondDeposited(uint256 indexed disputeId, address indexed payer, uint256 amount);
    event BondSettled(
        uint256 indexed disputeId, uint256 paidOut, address indexed remainderTo, uint256 remainder
    );
    event Credited(address indexed account, uint256 amount);
    event Withdrawn(address indexed account, uint256 amount);

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
    function withdraw() external returns (uint256 amount);

    function escrowOf(uint256 taskId) external view returns (uint256);
    function bondOf(uint256 disputeId) external view returns (uint256);
    function balanceOf(address account) external view returns (uint256);
    function totalLiabilities() external view returns (uint256);
}
