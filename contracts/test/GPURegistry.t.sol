// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {BaseTest} from "./BaseTest.sol";
import {GPURegistry} from "../src/GPURegistry.sol";
import {IGPURegistry as IG} from "../src/interfaces/IGPURegistry.sol";

contract GPURegistryTest is BaseTest {
    address internal miner;
    address internal signer;
    address internal manager = makeAddr("manager"); // stands in for the task registry
    address internal slasher = makeAddr("slasher");

    function setUp() public override {
        super.setUp();
        miner = miners[0];
        signer = _signer(0);
        vm.startPrank(governor);
        registry.grantRole(registry.TASK_MANAGER_ROLE(), manager);
        registry.grantRole(registry.SLASHER_ROLE(), slasher);
        vm.stopPrank();
    }

    function _registerMiner() internal {
        _register(0, MINER_STAKE);
    }

    function _lock(uint256 amount) internal {
        vm.prank(manager);
        registry.lockStake(miner, amount);
    }

    function _unstake(uint256 amount) internal {
        vm.prank(miner);
        registry.requestUnstake(amount);
    }

    function _expectRegisterRevert(IG.MinerProfile memory p, uint256 stake, bytes memory err) internal {
        _fund(miner, address(registry), stake);
        vm.prank(miner);
        vm.expectRevert(err);
        registry.register(p, stake);
    }

    // ---- constructor

    function test_constructor_setsRolesAndParameters() public {
        vm.expectEmit();
        emit IG.MinStakeChanged(7);
        vm.expectEmit();
        emit IG.UnbondingPeriodChanged(2 hours);
        GPURegistry r = new GPURegistry(IERC20(address(token)), bob, 7, 2 hours);
        assertTrue(r.hasRole(0x00, bob));
        assertTrue(r.hasRole(r.PAUSER_ROLE(), bob));
        assertFalse(r.hasRole(0x00, address(this)));
        assertEq(r.minStake(), 7);
        assertEq(r.unbondingPeriod(), 2 hours);
        assertEq(address(r.token()), address(token));
    }

    function test_constructor_reverts() public {
        IERC20 t = IERC20(address(token));
        vm.expectRevert(IG.ZeroAddress.selector);
        new GPURegistry(IERC20(address(0)), admin, MIN_STAKE, UNBONDING);
        vm.expectRevert(IG.ZeroAddress.selector);
        new GPURegistry(t, address(0), MIN_STAKE, UNBONDING);
        vm.expectRevert(IG.ZeroAmount.selector);
        new GPURegistry(t, admin, 0, UNBONDING);
        vm.expectRevert(abi.encodeWithSelector(IG.UnbondingPeriodTooShort.selector, 1 hours - 1, 1 hours));
        new GPURegistry(t, admin, MIN_STAKE, 1 hours - 1);
    }

    // ---- register

    function test_register_storesProfileAndStake() public {
        IG.MinerProfile memory p = _profile(signer);
        _fund(miner, address(registry), MINER_STAKE);
        vm.expectEmit(address(registry));
        emit IG.MinerRegistered(
            miner,
            signer,
            p.gpuClass,
            p.vramGb,
            p.gpuCount,
            p.region,
            p.priceFloor,
            p.endpoint,
            p.modelIds,
            MINER_STAKE
        );
        vm.prank(miner);
        registry.register(p, MINER_STAKE);

        assertTrue(registry.isRegistered(miner));
        assertEq(registry.signerOf(miner), signer);
        IG.MinerProfile memory q = registry.profileOf(miner);
        assertEq(abi.encode(q), abi.encode(p), "profile stored as given");
        assertTrue(registry.supportsModel(miner, MODEL));
        assertTrue(registry.supportsModel(miner, OTHER_MODEL));
        assertFalse(registry.supportsModel(miner, UNSUPPORTED_MODEL));
        assertFalse(registry.supportsModel(bob, MODEL));

        IG.Stake memory s = registry.stakeOf(miner);
        assertEq(s.free, MINER_STAKE);
        assertEq(s.locked + s.unbonding + s.unbondingReleaseAt, 0);
        assertEq(token.balanceOf(address(registry)), MINER_STAKE);
        assertEq(token.balanceOf(miner), 0);
    }

    function test_register_acceptsExactMinimumAndLimits() public {
        IG.MinerProfile memory p = _profile(signer);
        p.modelIds = new bytes32[](16);
        for (uint256 i = 0; i < 16; ++i) {
            p.modelIds[i] = bytes32(i + 1);
        }
        p.endpoint = string(new bytes(256));
        _fund(miner, address(registry), MIN_STAKE);
        vm.prank(miner);
        registry.register(p, MIN_STAKE);
        assertEq(registry.stakeOf(miner).free, MIN_STAKE);
        assertTrue(registry.supportsModel(miner, bytes32(uint256(16))));
    }

    function test_register_reverts() public {
        bytes memory invalidHardware = abi.encodeWithSelector(IG.InvalidHardware.selector);
        _expectRegisterRevert(
            _profile(address(0)), MINER_STAKE, abi.encodeWithSelector(IG.ZeroAddress.selector)
        );
        IG.MinerProfile memory p = _profile(signer);
        p.vramGb = 0;
        _expectRegisterRevert(p, MINER_STAKE, invalidHardware);
        p = _profile(signer);
        p.gpuCount = 0;
        _expectRegisterRevert(p, MINER_STAKE, invalidHardware);
        p = _profile(signer);
        p.gpuClass = 0;
        _expectRegisterRevert(p, MINER_STAKE, invalidHardware);
        p = _profile(signer);
        p.modelIds = new bytes32[](0);
        _expectRegisterRevert(p, MINER_STAKE, abi.encodeWithSelector(IG.NoModels.selector));
        p.modelIds = new bytes32[](17);
        _expectRegisterRevert(p, MINER_STAKE, abi.encodeWithSelector(IG.TooManyModels.selector, 17, 16));
        p = _profile(signer);
        p.endpoint = string(new bytes(257));
        _expectRegisterRevert(p, MINER_STAKE, abi.encodeWithSelector(IG.EndpointTooLong.selector, 257, 256));
        _expectRegisterRevert(
            _profile(signer),
            MIN_STAKE - 1,
            abi.encodeWithSelector(IG.StakeBelowMinimum.selector, MIN_STAKE - 1, MIN_STAKE)
        );

        _registerMiner();
        _expectRegisterRevert(
            _profile(signer), MINER_STAKE, abi.encodeWithSelector(IG.AlreadyRegistered.selector, miner)
        );
    }

    function test_register_revertsWithoutAllowance() public {
        _mint(miner, MINER_STAKE);
        vm.prank(miner);
        vm.expectRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector, address(registry), 0, MINER_STAKE
            )
        );
        registry.register(_profile(signer), MINER_STAKE);
    }

    function test_register_revertsWhenPaused() public {
        vm.prank(admin);
        registry.pause();
        _expectRegisterRevert(
            _profile(signer), MINER_STAKE, abi.encodeWithSelector(Pausable.EnforcedPause.selector)
        );
    }

    // ---- signer and stake

    function test_setSigner() public {
        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.NotRegistered.selector, miner));
        registry.setSigner(bob);
        _registerMiner();
        vm.prank(miner);
        vm.expectRevert(IG.ZeroAddress.selector);
        registry.setSigner(address(0));

        vm.prank(admin);
        registry.pause(); // key rotation keeps working while paused
        vm.expectEmit(address(registry));
        emit IG.SignerChanged(miner, bob);
        vm.prank(miner);
        registry.setSigner(bob);
        assertEq(registry.signerOf(miner), bob);
    }

    function test_setEndpoint() public {
        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.NotRegistered.selector, miner));
        registry.setEndpoint("tcp://10.0.0.2:5555");
        _registerMiner();
        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.EndpointTooLong.selector, 257, 256));
        registry.setEndpoint(string(new bytes(257)));

        vm.expectEmit(address(registry));
        emit IG.EndpointChanged(miner, "tcp://10.0.0.2:5555");
        vm.prank(miner);
        registry.setEndpoint("tcp://10.0.0.2:5555");
        assertEq(registry.profileOf(miner).endpoint, "tcp://10.0.0.2:5555");
        assertEq(registry.signerOf(miner), signer, "nothing else changes");
    }

    function test_addStake() public {
        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.NotRegistered.selector, miner));
        registry.addStake(1);
        _registerMiner();
        _fund(miner, address(registry), 42e6);
        vm.prank(miner);
        vm.expectRevert(IG.ZeroAmount.selector);
        registry.addStake(0);

        vm.expectEmit(address(registry));
        emit IG.StakeAdded(miner, 42e6);
        vm.prank(miner);
        registry.addStake(42e6);
        assertEq(registry.stakeOf(miner).free, MINER_STAKE + 42e6);
        assertEq(token.balanceOf(address(registry)), MINER_STAKE + 42e6);
        assertEq(token.balanceOf(miner), 0);
    }

    function test_addStake_revertsWhenPaused() public {
        _registerMiner();
        _fund(miner, address(registry), 1e6);
        vm.prank(admin);
        registry.pause();
        vm.prank(miner);
        vm.expectRevert(Pausable.EnforcedPause.selector);
        registry.addStake(1e6);
    }

    function test_requestUnstake_movesFreeToUnbonding() public {
        _registerMiner();
        vm.expectEmit(address(registry));
        emit IG.UnstakeRequested(miner, 30e6, block.timestamp + UNBONDING);
        _unstake(30e6);
        IG.Stake memory s = registry.stakeOf(miner);
        assertEq(s.free, MINER_STAKE - 30e6);
        assertEq(s.unbonding, 30e6);
        assertEq(s.unbondingReleaseAt, block.timestamp + UNBONDING);
        assertEq(token.balanceOf(address(registry)), MINER_STAKE, "tokens stay until withdrawal");

        // A second request restarts the clock for everything unbonding.
        vm.warp(block.timestamp + 2 days);
        _unstake(5e6);
        s = registry.stakeOf(miner);
        assertEq(s.unbonding, 35e6);
        assertEq(s.unbondingReleaseAt, block.timestamp + UNBONDING);
        _unstake(s.free);
        assertEq(registry.stakeOf(miner).free, 0);
        assertTrue(registry.isRegistered(miner), "still registered with no stake");
    }

    function test_requestUnstake_reverts() public {
        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.NotRegistered.selector, miner));
        registry.requestUnstake(1);
        _registerMiner();
        vm.prank(miner);
        vm.expectRevert(IG.ZeroAmount.selector);
        registry.requestUnstake(0);
        vm.prank(miner);
        vm.expectRevert(
            abi.encodeWithSelector(IG.InsufficientFreeStake.selector, miner, MINER_STAKE + 1, MINER_STAKE)
        );
        registry.requestUnstake(MINER_STAKE + 1);
        _lock(400e6); // locked stake cannot be unstaked
        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.InsufficientFreeStake.selector, miner, 100e6 + 1, 100e6));
        registry.requestUnstake(100e6 + 1);
    }

    function test_withdrawStake_paysOutFromReleaseTime() public {
        _registerMiner();
        _unstake(30e6);
        uint256 releaseAt = block.timestamp + UNBONDING;
        vm.warp(releaseAt - 1);
        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.UnbondingNotFinished.selector, releaseAt, releaseAt - 1));
        registry.withdrawStake();

        vm.warp(releaseAt);
        vm.expectEmit(address(registry));
        emit IG.StakeWithdrawn(miner, 30e6);
        vm.prank(miner);
        assertEq(registry.withdrawStake(), 30e6);
        IG.Stake memory s = registry.stakeOf(miner);
        assertEq(s.unbonding + s.unbondingReleaseAt, 0);
        assertEq(s.free, MINER_STAKE - 30e6);
        assertEq(token.balanceOf(miner), 30e6);
        assertEq(token.balanceOf(address(registry)), MINER_STAKE - 30e6);

        vm.prank(miner);
        vm.expectRevert(abi.encodeWithSelector(IG.NothingUnbonding.selector, miner));
        registry.withdrawStake();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IG.NothingUnbonding.selector, stranger));
        registry.withdrawStake();
    }

    function test_unstakeAndWithdraw_workWhilePaused() public {
        _registerMiner();
        vm.prank(admin);
        registry.pause();
        _unstake(MINER_STAKE);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(miner);
        registry.withdrawStake();
        assertEq(token.balanceOf(miner), MINER_STAKE);
        assertEq(token.balanceOf(address(registry)), 0);
    }

    // ---- lock, unlock, slash

    function test_lockAndUnlockStake() public {
        _registerMiner();
        vm.expectEmit(address(registry));
        emit IG.StakeLocked(miner, 60e6);
        _lock(60e6);
        vm.expectEmit(address(registry));
        emit IG.StakeUnlocked(miner, 25e6);
        vm.prank(manager);
        registry.unlockStake(miner, 25e6);
        IG.Stake memory s = registry.stakeOf(miner);
        assertEq(s.free, MINER_STAKE - 35e6);
        assertEq(s.locked, 35e6);
    }

    function test_lockAndUnlockStake_reverts() public {
        _registerMiner();
        bytes memory err = _unauthorized(stranger, registry.TASK_MANAGER_ROLE());
        vm.startPrank(stranger);
        vm.expectRevert(err);
        registry.lockStake(miner, 1);
        vm.expectRevert(err);
        registry.unlockStake(miner, 0);
        vm.stopPrank();

        vm.startPrank(manager);
        vm.expectRevert(abi.encodeWithSelector(IG.NotRegistered.selector, bob));
        registry.lockStake(bob, 0);
        vm.expectRevert(
            abi.encodeWithSelector(IG.InsufficientFreeStake.selector, miner, MINER_STAKE + 1, MINER_STAKE)
        );
        registry.lockStake(miner, MINER_STAKE + 1);
        registry.lockStake(miner, 10e6);
        vm.expectRevert(abi.encodeWithSelector(IG.InsufficientLockedStake.selector, miner, 10e6 + 1, 10e6));
        registry.unlockStake(miner, 10e6 + 1);
        vm.stopPrank();
    }

    function test_slash_takesLockedStakeOnly() public {
        _registerMiner();
        _lock(60e6);
        vm.expectEmit(address(registry));
        emit IG.StakeSlashed(miner, 40e6, bob);
        vm.prank(slasher);
        registry.slash(miner, 40e6, bob);
        IG.Stake memory s = registry.stakeOf(miner);
        assertEq(s.free, MINER_STAKE - 60e6);
        assertEq(s.locked, 20e6);
        assertEq(token.balanceOf(bob), 40e6);
        assertEq(token.balanceOf(address(registry)), MINER_STAKE - 40e6);
    }

    function test_slash_reverts() public {
        _registerMiner();
        bytes memory err = _unauthorized(manager, registry.SLASHER_ROLE());
        vm.prank(manager);
        vm.expectRevert(err);
        registry.slash(miner, 0, bob);

        vm.startPrank(slasher);
        // Free stake is never slashable.
        vm.expectRevert(abi.encodeWithSelector(IG.InsufficientLockedStake.selector, miner, 1, 0));
        registry.slash(miner, 1, bob);
        vm.stopPrank();
        _lock(10e6);
        vm.prank(slasher);
        vm.expectRevert(IG.ZeroAddress.selector);
        registry.slash(miner, 10e6, address(0));
    }

    // ---- admin

    function test_setMinStake() public {
        vm.expectEmit(address(registry));
        emit IG.MinStakeChanged(1);
        vm.prank(governor);
        registry.setMinStake(1);
        assertEq(registry.minStake(), 1);
        vm.prank(governor);
        vm.expectRevert(IG.ZeroAmount.selector);
        registry.setMinStake(0);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        registry.setMinStake(1);
    }

    function test_setUnbondingPeriod_appliesToLaterRequests() public {
        _registerMiner();
        _unstake(1e6);
        uint256 firstRelease = block.timestamp + UNBONDING;
        vm.expectEmit(address(registry));
        emit IG.UnbondingPeriodChanged(1 hours);
        vm.prank(governor);
        registry.setUnbondingPeriod(1 hours);
        assertEq(registry.unbondingPeriod(), 1 hours);
        assertEq(registry.stakeOf(miner).unbondingReleaseAt, firstRelease, "pending request unchanged");
        _unstake(1e6);
        assertEq(registry.stakeOf(miner).unbondingReleaseAt, block.timestamp + 1 hours);

        vm.prank(governor);
        vm.expectRevert(abi.encodeWithSelector(IG.UnbondingPeriodTooShort.selector, 1 hours - 1, 1 hours));
        registry.setUnbondingPeriod(1 hours - 1);
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, 0x00));
        registry.setUnbondingPeriod(1 days);
    }

    function test_pause_unpause() public {
        bytes32 role = registry.PAUSER_ROLE();
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, role));
        registry.pause();
        vm.expectEmit(address(registry));
        emit Pausable.Paused(admin);
        vm.prank(admin);
        registry.pause();
        assertTrue(registry.paused());
        vm.prank(admin);
        vm.expectRevert(Pausable.EnforcedPause.selector);
        registry.pause();
        vm.prank(stranger);
        vm.expectRevert(_unauthorized(stranger, role));
        registry.unpause();

        vm.expectEmit(address(registry));
        emit Pausable.Unpaused(admin);
        vm.prank(admin);
        registry.unpause();
        vm.prank(admin);
        vm.expectRevert(Pausable.ExpectedPause.selector);
        registry.unpause();
        _registerMiner();
        assertTrue(registry.isRegistered(miner), "register works again");
    }
}
