// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {BaseTest, DeployHarness} from "./BaseTest.sol";
import {Deploy} from "../script/Deploy.s.sol";
import {MockStablecoin} from "../src/MockStablecoin.sol";
import {IArbitration} from "../src/interfaces/IArbitration.sol";
import {TimelockController} from "@openzeppelin/contracts/governance/TimelockController.sol";

/// @notice The deploy script wires every role the protocol needs, and only those; the mock token.
contract DeployTest is BaseTest {
    function test_deploy_wiresProtocolRoles() public view {
        assertTrue(registry.hasRole(registry.TASK_MANAGER_ROLE(), address(tasks)), "registry: task manager");
        assertTrue(registry.hasRole(registry.SLASHER_ROLE(), address(tasks)), "registry: slasher");
        assertTrue(escrow.hasRole(escrow.TASK_MANAGER_ROLE(), address(tasks)), "escrow: task manager");
        assertTrue(escrow.hasRole(escrow.ARBITER_ROLE(), address(arbitration)), "escrow: arbiter");
        assertTrue(tasks.hasRole(tasks.ARBITER_ROLE(), address(arbitration)), "tasks: arbiter");
        assertTrue(tasks.hasRole(tasks.COORDINATOR_ROLE(), coordinator), "tasks: coordinator");
    }

    /// @dev The timelock holds every protocol contract's admin role; the admin keeps only pausing (and the mock
    /// token's faucet).
    function test_deploy_timelockHoldsAdminRoles() public view {
        bytes32 adminRole = 0x00;
        assertTrue(token.hasRole(adminRole, admin));
        assertTrue(token.hasRole(token.MINTER_ROLE(), admin));
        assertTrue(registry.hasRole(registry.PAUSER_ROLE(), admin));
        assertTrue(tasks.hasRole(tasks.PAUSER_ROLE(), admin));
        address[5] memory governed = [
            address(registry),
            address(escrow),
            address(tasks),
            address(verifierRegistry),
            address(arbitration)
        ];
        for (uint256 i = 0; i < governed.length; ++i) {
            assertTrue(IAccessControl(governed[i]).hasRole(adminRole, governor), "timelock is admin");
            assertFalse(IAccessControl(governed[i]).hasRole(adminRole, admin), "admin renounced");
        }
        TimelockController t = TimelockController(payable(governor));
        assertEq(t.getMinDelay(), TIMELOCK_DELAY);
        assertTrue(t.hasRole(t.PROPOSER_ROLE(), admin));
        assertTrue(t.hasRole(t.EXECUTOR_ROLE(), admin));
        assertFalse(t.hasRole(t.DEFAULT_ADMIN_ROLE(), admin), "no one can change the delay but the timelock");
    }

    /// @dev The admin cannot change a parameter directly; it schedules the change, which anyone can see, and
    /// executes it only after the delay.
    function test_deploy_adminActsOnlyThroughTheTimelock() public {
        vm.prank(admin);
        vm.expectRevert(_unauthorized(admin, 0x00));
        tasks.setChallengeWindow(2 hours);

        TimelockController t = TimelockController(payable(governor));
        bytes memory call = abi.encodeCall(tasks.setChallengeWindow, (2 hours));
        vm.prank(admin);
        t.schedule(address(tasks), 0, call, bytes32(0), bytes32(0), TIMELOCK_DELAY);
        vm.warp(block.timestamp + TIMELOCK_DELAY - 1);
        vm.prank(admin);
        vm.expectRevert();
        t.execute(address(tasks), 0, call, bytes32(0), bytes32(0));
        vm.warp(block.timestamp + 1);
        vm.prank(admin);
        t.execute(address(tasks), 0, call, bytes32(0), bytes32(0));
        assertEq(tasks.challengeWindow(), 2 hours);
    }

    function test_deploy_grantsNothingElse() public view {
        address d = address(deployer);
        bytes32 adminRole = 0x00;
        // The script contract itself keeps no power.
        assertFalse(registry.hasRole(adminRole, d));
        assertFalse(escrow.hasRole(adminRole, d));
        assertFalse(tasks.hasRole(adminRole, d));
        assertFalse(arbitration.hasRole(adminRole, d));
        assertFalse(token.hasRole(token.MINTER_ROLE(), d));
        // Protocol roles sit only where they are needed.
        assertFalse(registry.hasRole(registry.SLASHER_ROLE(), address(arbitration)));
        assertFalse(registry.hasRole(registry.TASK_MANAGER_ROLE(), address(arbitration)));
        assertFalse(escrow.hasRole(escrow.ARBITER_ROLE(), address(tasks)));
        assertFalse(escrow.hasRole(escrow.TASK_MANAGER_ROLE(), address(arbitration)));
        assertFalse(tasks.hasRole(tasks.COORDINATOR_ROLE(), admin));
        assertFalse(tasks.hasRole(tasks.ARBITER_ROLE(), coordinator));
        assertFalse(tasks.hasRole(adminRole, coordinator));
        // Verifiers are not part of the deployment: anyone stakes to become one (setUp registers some).
        assertFalse(verifierRegistry.isVerifier(coordinator));
        assertFalse(verifierRegistry.isVerifier(admin));
    }

    function test_deploy_linksContractsAndParameters() public view {
        assertEq(address(registry.token()), address(token));
        assertEq(address(escrow.token()), address(token));
        assertEq(address(tasks.gpuRegistry()), address(registry));
        assertEq(address(tasks.escrow()), address(escrow));
        assertEq(address(arbitration.taskRegistry()), address(tasks));
        assertEq(address(arbitration.gpuRegistry()), address(registry));
        assertEq(address(arbitration.escrow()), address(escrow));

        assertEq(registry.minStake(), MIN_STAKE);
        assertEq(registry.unbondingPeriod(), UNBONDING);
        assertEq(tasks.challengeWindow(), CHALLENGE_WINDOW);
        assertEq(tasks.coordinatorFeeBps(), FEE_BPS);
        assertEq(tasks.feeRecipient(), feeRecipient);
        assertEq(tasks.minStakeLock(), MIN_STAKE_LOCK);
        assertEq(tasks.taskCount(), 0);
        assertEq(arbitration.disputeBond(), DISPUTE_BOND);
        assertEq(tasks.maxValueAtRisk(), MAX_VALUE_AT_RISK);
        IArbitration.Config memory c = arbitration.config();
        assertEq(c.votingPeriod, VOTING_PERIOD);
        assertEq(c.verifierRewardBps, REWARD_BPS);
        assertEq(verifierRegistry.unbondingPeriod(), VERIFIER_UNBONDING);
        assertEq(address(arbitration.verifiers()), address(verifierRegistry));
        assertEq(verifierRegistry.penaltySink(), address(escrow));
        assertTrue(verifierRegistry.hasRole(verifierRegistry.ARBITER_ROLE(), address(arbitration)));
        assertEq(c.auditRateBps, AUDIT_RATE_BPS);
        assertEq(c.jurorPenaltyBps, PENALTY_BPS);
        assertEq(c.noDecisionFeeBps, NO_DECISION_FEE_BPS);
        assertEq(c.baseJury, BASE_JURY);
        assertEq(c.auditRewardPerDay, AUDIT_REWARD_PER_DAY);
        assertEq(verifierRegistry.minStake(), MIN_VERIFIER_STAKE);
        assertEq(verifierRegistry.totalWeight(MODEL), VERIFIER_COUNT);
        assertEq(address(verifierRegistry.token()), address(token));
        assertEq(arbitration.disputeCount(), 0);
        assertEq(token.decimals(), 6);
        assertEq(token.totalSupply(), VERIFIER_COUNT * MIN_VERIFIER_STAKE); // setUp's verifiers
        assertEq(token.balanceOf(address(verifierRegistry)), VERIFIER_COUNT * MIN_VERIFIER_STAKE);
        assertEq(escrow.totalLiabilities(), 0);
        assertEq(escrow.auditPool(), 0);
    }

    /// @dev What `run` deploys a devnet with: the values BaseTest mirrors, with one task in ten audited.
    function test_deploy_scriptDefaults() public view {
        Deploy.Params memory p = deployer.defaults(bob);
        assertEq(p.admin, bob);
        assertEq(p.coordinator, bob);
        assertEq(p.feeRecipient, bob);
        assertEq(p.token, address(0));
        Deploy.Params memory expected = defaultParams();
        (expected.admin, expected.coordinator, expected.feeRecipient) = (bob, bob, bob);
        assertEq(abi.encode(p), abi.encode(expected));
        assertEq(p.auditRateBps, 1_000);
        assertEq(p.minVerifierStake, 100e6);
        assertEq(p.verifierUnbondingPeriod, 3 days);
    }

    function test_deploy_usesGivenToken() public {
        MockStablecoin existing = new MockStablecoin(admin);
        Deploy.Params memory p = defaultParams();
        p.token = address(existing);
        Deploy.Deployed memory d = new DeployHarness().deployAs(p);
        assertEq(d.token, address(existing));
        assertEq(address(d.gpuRegistry.token()), address(existing));
        assertEq(address(d.escrow.token()), address(existing));
    }

    /// @dev `deploy` must run as the admin (the script broadcasts it); called by any other account the first role
    /// grant fails.
    function test_deploy_revertsUnlessCallerIsAdmin() public {
        Deploy script = new Deploy();
        vm.expectRevert(
            abi.encodeWithSelector(
                IAccessControl.AccessControlUnauthorizedAccount.selector, address(script), bytes32(0)
            )
        );
        script.deploy(defaultParams());
    }

    function test_token_mintIsRestricted() public {
        assertEq(token.name(), "Mock USD");
        assertEq(token.symbol(), "mUSD");
        bytes32 role = token.MINTER_ROLE();
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, role));
        token.mint(stranger, 1);
        uint256 supply = token.totalSupply();
        vm.expectEmit(address(token));
        emit IERC20.Transfer(address(0), alice, 123e6);
        vm.prank(admin);
        token.mint(alice, 123e6);
        assertEq(token.balanceOf(alice), 123e6);
        assertEq(token.totalSupply(), supply + 123e6);
    }
}
