// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {BaseTest} from "./BaseTest.sol";
import {PaymentEscrow} from "../src/PaymentEscrow.sol";
import {IPaymentEscrow as IE} from "../src/interfaces/IPaymentEscrow.sol";

/// @notice The escrow on its own: test accounts hold the task-manager and arbiter roles.
contract PaymentEscrowTest is BaseTest {
    address internal manager = makeAddr("manager");
    address internal arbiter = makeAddr("arbiter");
    address internal payer = makeAddr("payer");
    address internal carol = makeAddr("carol");

    function setUp() public override {
        super.setUp();
        vm.startPrank(governor);
        escrow.grantRole(escrow.TASK_MANAGER_ROLE(), manager);
        escrow.grantRole(escrow.ARBITER_ROLE(), arbiter);
        vm.stopPrank();
    }

    function _deposit(uint256 taskId, uint256 amount) internal {
        _fund(payer, address(escrow), amount);
        vm.prank(manager);
        escrow.depositEscrow(taskId, payer, amount);
    }

    function _bond(uint256 disputeId, uint256 amount) internal {
        _fund(payer, address(escrow), amount);
        vm.prank(arbiter);
        escrow.depositBond(disputeId, payer, amount);
    }

    function _two(address a, address b) internal pure returns (address[] memory l) {
        l = new address[](2);
        (l[0], l[1]) = (a, b);
    }

    function _two(uint256 a, uint256 b) internal pure returns (uint256[] memory l) {
        l = new uint256[](2);
        (l[0], l[1]) = (a, b);
    }

    function test_constructor() public {
        PaymentEscrow e = new PaymentEscrow(IERC20(address(token)), bob);
        assertTrue(e.hasRole(0x00, bob));
        assertEq(address(e.token()), address(token));
        vm.expectRevert(IE.ZeroAddress.selector);
        new PaymentEscrow(IERC20(address(0)), admin);
        vm.expectRevert(IE.ZeroAddress.selector);
        new PaymentEscrow(IERC20(address(token)), address(0));
    }

    function test_roleChecks() public {
        bytes memory notManager = _unauthorized(arbiter, escrow.TASK_MANAGER_ROLE());
        bytes memory notArbiter = _unauthorized(manager, escrow.ARBITER_ROLE());
        address[] memory none = new address[](0);
        uint256[] memory zero = new uint256[](0);
        vm.startPrank(arbiter);
        vm.expectRevert(notManager);
        escrow.depositEscrow(1, payer, 1);
        vm.expectRevert(notManager);
        escrow.settleEscrow(1, none, zero, carol);
        vm.stopPrank();
        vm.startPrank(manager);
        vm.expectRevert(notArbiter);
        escrow.depositBond(1, payer, 1);
        vm.expectRevert(notArbiter);
        escrow.releaseBond(1);
        vm.expectRevert(notArbiter);
        escrow.absorbReceived();
        vm.expectRevert(notArbiter);
        escrow.distribute(none, zero);
        vm.expectRevert(notArbiter);
        escrow.fundAuditPool(payer, 1);
        vm.expectRevert(notArbiter);
        escrow.depositBondFromAuditPool(1, 1);
        vm.stopPrank();
    }

    // ---- escrows

    function test_depositEscrow_pullsFromPayer() public {
        _fund(payer, address(escrow), 70e6);
        vm.expectEmit(address(escrow));
        emit IE.EscrowDeposited(9, payer, 70e6);
        vm.prank(manager);
        escrow.depositEscrow(9, payer, 70e6);
        assertEq(escrow.escrowOf(9), 70e6);
        assertEq(escrow.totalLiabilities(), 70e6);
        assertEq(token.balanceOf(address(escrow)), 70e6);
        assertEq(token.balanceOf(payer), 0);
    }

    function test_depositEscrow_reverts() public {
        _mint(payer, 5);
        vm.startPrank(manager);
        vm.expectRevert(IE.ZeroAmount.selector);
        escrow.depositEscrow(1, payer, 0);
        vm.expectRevert(
            abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(escrow), 0, 5)
        );
        escrow.depositEscrow(1, payer, 5);
        vm.stopPrank();
        _deposit(1, 5);
        _fund(payer, address(escrow), 5);
        vm.prank(manager);
        vm.expectRevert(abi.encodeWithSelector(IE.EscrowAlreadyFunded.selector, 1));
        escrow.depositEscrow(1, payer, 5);
    }

    function test_settleEscrow_creditsPayeesAndRefund() public {
        _deposit(3, 100);
        vm.expectEmit(address(escrow));
        emit IE.Credited(alice, 60);
        vm.expectEmit(address(escrow));
        emit IE.Credited(bob, 15);
        vm.expectEmit(address(escrow));
        emit IE.Credited(carol, 25);
        vm.expectEmit(address(escrow));
        emit IE.EscrowSettled(3, 75, carol, 25);
        vm.prank(manager);
        escrow.settleEscrow(3, _two(alice, bob), _two(60, 15), carol);

        assertEq(escrow.escrowOf(3), 0);
        assertEq(escrow.balanceOf(alice), 60);
        assertEq(escrow.balanceOf(bob), 15);
        assertEq(escrow.balanceOf(carol), 25);
        assertEq(escrow.totalLiabilities(), 100, "settling moves liabilities");
        _assertEscrowSolvent();

        // Settles once: later payouts exceed the emptied escrow; an empty settlement moves nothing.
        vm.startPrank(manager);
        vm.expectRevert(abi.encodeWithSelector(IE.PayoutExceedsEscrow.selector, 1, 0));
        escrow.settleEscrow(3, _two(alice, bob), _two(1, 0), carol);
        escrow.settleEscrow(3, new address[](0), new uint256[](0), carol);
        vm.stopPrank();
        assertEq(escrow.balanceOf(carol), 25);
    }

    function test_settleEscrow_skipsZeroAmounts() public {
        _deposit(3, 100);
        vm.recordLogs();
        vm.prank(manager);
        escrow.settleEscrow(3, _two(alice, address(0)), _two(100, 0), carol);
        assertEq(vm.getRecordedLogs().length, 2, "Credited(alice) and EscrowSettled only");
        assertEq(escrow.balanceOf(alice), 100);
        assertEq(escrow.balanceOf(carol), 0);
    }

    function test_settleEscrow_reverts() public {
        _deposit(3, 100);
        vm.startPrank(manager);
        vm.expectRevert(abi.encodeWithSelector(IE.PayoutExceedsEscrow.selector, 101, 100));
        escrow.settleEscrow(3, _two(alice, bob), _two(60, 41), carol);
        vm.expectRevert(abi.encodeWithSelector(IE.LengthMismatch.selector, 2, 1));
        escrow.settleEscrow(3, _two(alice, bob), new uint256[](1), carol);
        vm.expectRevert(IE.ZeroAddress.selector);
        escrow.settleEscrow(3, _two(alice, address(0)), _two(60, 1), carol);
        vm.expectRevert(IE.ZeroAddress.selector);
        escrow.settleEscrow(3, _two(alice, bob), _two(60, 1), address(0));
        vm.stopPrank();
    }

    // ---- bonds

    function test_depositBond() public {
        _fund(payer, address(escrow), 5e6);
        vm.expectEmit(address(escrow));
        emit IE.BondDeposited(4, payer, 5e6);
        vm.prank(arbiter);
        escrow.depositBond(4, payer, 5e6);
        assertEq(escrow.bondOf(4), 5e6);
        assertEq(escrow.totalLiabilities(), 5e6);
        assertEq(token.balanceOf(address(escrow)), 5e6);

        vm.startPrank(arbiter);
        vm.expectRevert(IE.ZeroAmount.selector);
        escrow.depositBond(1, payer, 0);
        vm.expectRevert(abi.encodeWithSelector(IE.BondAlreadyPosted.selector, 4));
        escrow.depositBond(4, payer, 5);
        vm.stopPrank();
    }

    /// @dev A released bond joins the float; `distribute` pays out of it and sends the rest to the audit pool.
    function test_releaseBond_thenDistribute() public {
        _bond(4, 1000);
        vm.startPrank(arbiter);
        vm.expectEmit(address(escrow));
        emit IE.BondReleased(4, 1000);
        assertEq(escrow.releaseBond(4), 1000);
        assertEq(escrow.bondOf(4), 0);
        assertEq(escrow.releaseBond(4), 0, "a released bond releases nothing again");
        assertEq(escrow.arbitrationFloat(), 1000);
        vm.expectRevert(abi.encodeWithSelector(IE.PayoutExceedsFloat.selector, 1001, 1000));
        escrow.distribute(_two(alice, bob), _two(1000, 1));
        vm.expectRevert(abi.encodeWithSelector(IE.LengthMismatch.selector, 2, 0));
        escrow.distribute(_two(alice, bob), new uint256[](0));
        vm.expectRevert(IE.ZeroAddress.selector);
        escrow.distribute(_two(address(0), bob), _two(1, 0));
        vm.expectEmit(address(escrow));
        emit IE.Distributed(633, 367);
        escrow.distribute(_two(alice, bob), _two(300, 333));
        vm.stopPrank();
        assertEq(escrow.balanceOf(alice), 300);
        assertEq(escrow.balanceOf(bob), 333);
        assertEq(escrow.auditPool(), 367);
        assertEq(escrow.arbitrationFloat(), 0);
        assertEq(escrow.totalLiabilities(), 1000);
        _assertEscrowSolvent();
    }

    /// @dev Tokens sent without a deposit (slashed stake) are absorbed into the float; the pool and escrows are
    /// liabilities already and cannot be absorbed again.
    function test_absorbReceived_onlyTheSurplus() public {
        _deposit(1, 100);
        _pool(10e6);
        vm.prank(arbiter);
        assertEq(escrow.absorbReceived(), 0);
        _mint(address(escrow), 50);
        vm.startPrank(arbiter);
        vm.expectEmit(address(escrow));
        emit IE.Absorbed(50);
        assertEq(escrow.absorbReceived(), 50);
        assertEq(escrow.arbitrationFloat(), 50);
        vm.expectRevert(abi.encodeWithSelector(IE.PayoutExceedsFloat.selector, 51, 50));
        escrow.distribute(_two(alice, bob), _two(30, 21));
        escrow.distribute(_two(alice, bob), _two(30, 20));
        vm.stopPrank();
        assertEq(escrow.balanceOf(alice), 30);
        assertEq(escrow.balanceOf(bob), 20);
        assertEq(escrow.auditPool(), 10e6);
        assertEq(escrow.totalLiabilities(), 100 + 10e6 + 50);
        _assertEscrowSolvent();
    }

    // ---- audit pool

    function _pool(uint256 amount) internal {
        _fund(payer, address(escrow), amount);
        vm.prank(arbiter);
        escrow.fundAuditPool(payer, amount);
    }

    function test_fundAuditPool_pullsFromPayer() public {
        _fund(payer, address(escrow), 7e6);
        vm.expectEmit(address(escrow));
        emit IE.AuditPoolFunded(payer, 7e6);
        vm.prank(arbiter);
        escrow.fundAuditPool(payer, 7e6);
        assertEq(escrow.auditPool(), 7e6);
        assertEq(escrow.totalLiabilities(), 7e6);
        assertEq(token.balanceOf(address(escrow)), 7e6);
        assertEq(token.balanceOf(payer), 0);
        assertEq(escrow.balanceOf(payer), 0, "funding the pool is a gift, not a balance");

        vm.startPrank(arbiter);
        vm.expectRevert(IE.ZeroAmount.selector);
        escrow.fundAuditPool(payer, 0);
        vm.expectRevert(
            abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(escrow), 0, 1)
        );
        escrow.fundAuditPool(payer, 1);
        vm.stopPrank();
    }

    /// @dev A bond from the pool moves money the escrow already holds: liabilities stay the same.
    function test_depositBondFromAuditPool() public {
        _pool(12e6);
        vm.expectEmit(address(escrow));
        emit IE.AuditBondPosted(4, 5e6);
        vm.prank(arbiter);
        escrow.depositBondFromAuditPool(4, 5e6);
        assertEq(escrow.bondOf(4), 5e6);
        assertEq(escrow.auditPool(), 7e6);
        assertEq(escrow.totalLiabilities(), 12e6);
        _assertEscrowSolvent();

        vm.startPrank(arbiter);
        vm.expectRevert(IE.ZeroAmount.selector);
        escrow.depositBondFromAuditPool(5, 0);
        vm.expectRevert(abi.encodeWithSelector(IE.BondAlreadyPosted.selector, 4));
        escrow.depositBondFromAuditPool(4, 1);
        vm.expectRevert(abi.encodeWithSelector(IE.AuditPoolTooSmall.selector, 7e6, 7e6 + 1));
        escrow.depositBondFromAuditPool(5, 7e6 + 1);
        escrow.depositBondFromAuditPool(5, 7e6);
        vm.stopPrank();
        assertEq(escrow.auditPool(), 0);
    }

    /// @dev Class 10(c): what accumulates in the pool (dust, penalties no coherent seat could take) has an owner:
    /// only the admin (the timelock, so a delay ahead in public) credits it to someone, never beyond the pool,
    /// and liabilities stay the same (the money is still owed, now to a balance).
    function test_spendAuditPool_onlyTheAdmin_withinThePool() public {
        _pool(9e6);
        for (uint256 i = 0; i < 3; ++i) {
            address caller = [arbiter, manager, stranger][i];
            vm.expectRevert(_unauthorized(caller, 0x00));
            vm.prank(caller);
            escrow.spendAuditPool(caller, 1);
        }
        vm.expectRevert(abi.encodeWithSelector(IE.AuditPoolTooSmall.selector, 9e6, 9e6 + 1));
        vm.prank(governor);
        escrow.spendAuditPool(carol, 9e6 + 1);
        vm.expectEmit(address(escrow));
        emit IE.AuditPoolSpent(carol, 4e6);
        vm.prank(governor);
        escrow.spendAuditPool(carol, 4e6);
        assertEq(escrow.auditPool(), 5e6);
        assertEq(escrow.balanceOf(carol), 4e6);
        assertEq(escrow.totalLiabilities(), 9e6);
        _assertEscrowSolvent();
        vm.prank(carol);
        assertEq(escrow.withdraw(), 4e6);
        assertEq(token.balanceOf(carol), 4e6);
        _assertEscrowSolvent();
    }

    /// @dev A pool bond released and not paid out goes back to the pool whole.
    function test_poolBond_returnsToPool() public {
        _pool(5e6);
        vm.startPrank(arbiter);
        escrow.depositBondFromAuditPool(4, 5e6);
        assertEq(escrow.auditPool(), 0);
        escrow.releaseBond(4);
        escrow.distribute(new address[](0), new uint256[](0));
        vm.stopPrank();
        assertEq(escrow.auditPool(), 5e6);
        assertEq(escrow.totalLiabilities(), 5e6);
        _assertEscrowSolvent();
    }

    // ---- withdraw

    function test_withdraw_paysBalanceOnce() public {
        _deposit(3, 100);
        vm.prank(payer); // escrowed money is not withdrawable
        vm.expectRevert(abi.encodeWithSelector(IE.NothingToWithdraw.selector, payer));
        escrow.withdraw();
        vm.prank(manager);
        escrow.settleEscrow(3, _two(alice, bob), _two(60, 15), carol);

        vm.expectEmit(address(escrow));
        emit IE.Withdrawn(alice, 60);
        vm.prank(alice);
        assertEq(escrow.withdraw(), 60);
        assertEq(token.balanceOf(alice), 60);
        assertEq(escrow.balanceOf(alice), 0);
        assertEq(escrow.totalLiabilities(), 40);
        _assertEscrowSolvent();
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IE.NothingToWithdraw.selector, alice));
        escrow.withdraw();
    }
}
