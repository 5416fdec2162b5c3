// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Script} from "forge-std/Script.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {TimelockController} from "@openzeppelin/contracts/governance/TimelockController.sol";
import {MockStablecoin} from "../src/MockStablecoin.sol";
import {GPURegistry} from "../src/GPURegistry.sol";
import {PaymentEscrow} from "../src/PaymentEscrow.sol";
import {TaskRegistry} from "../src/TaskRegistry.sol";
import {Arbitration} from "../src/Arbitration.sol";
import {VerifierRegistry} from "../src/VerifierRegistry.sol";
import {LineChallenges} from "../src/LineChallenges.sol";
import {Audits} from "../src/Audits.sol";
import {BlockRandomness} from "../src/BlockRandomness.sol";
import {IArbitration} from "../src/interfaces/IArbitration.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";

/// @title Deploy
/// @notice Deploys the market (mock token unless TOKEN is set, GPU registry, escrow, task registry, verifier
/// registry, the randomness juries and audits draw from, arbitration, audits, line challenges),
/// wires their roles, and writes a deployment file that every other component reads.
/// Every parameter has a default and can be overridden by an environment variable of the same name.
///
/// DEPLOYER_PRIVATE_KEY=0x... forge script contracts/script/Deploy.s.sol --rpc-url $RPC --broadcast
/// (without DEPLOYER_PRIVATE_KEY, forge's own wallet flags choose the broadcaster).
contract Deploy is Script {
    struct Params {
        address admin;
        address coordinator;
        address feeRecipient;
        address token;
        uint256 minStake;
        uint256 unbondingPeriod;
        uint256 challengeWindow;
        uint256 coordinatorFeeBps;
        uint256 minStakeLock;
        uint256 maxValueAtRisk;
        uint256 disputeBond;
        uint256 votingPeriod;
        uint256 verifierRewardBps;
        uint256 minVerifierStake;
        uint256 verifierUnbondingPeriod;
        uint256 auditRateBps;
        uint256 jurorPenaltyBps;
        uint256 noDecisionFeeBps;
        uint256 baseJury;
        uint256 auditRewardPerDay;
        uint256 timelockDelay;
        uint256 answerPeriod;
    }

    struct Deployed {
        address token;
        GPURegistry gpuRegistry;
        PaymentEscrow escrow;
        TaskRegistry taskRegistry;
        VerifierRegistry verifierRegistry;
        BlockRandomness randomness;
        Arbitration arbitration;
        Audits audits;
        LineChallenges lineChallenges;
        TimelockController timelock;
    }

    function run() external returns (Deployed memory deployed) {
        uint256 key = vm.envOr("DEPLOYER_PRIVATE_KEY", uint256(0));
        address broadcaster = key == 0 ? msg.sender : vm.addr(key);
        Params memory p = _params(broadcaster);
        uint256 startBlock = block.number;
        if (key == 0) vm.startBroadcast();
        else vm.startBroadcast(key);
        deployed = deploy(p);
        vm.stopBroadcast();
        _write(p, deployed, startBlock);
    }

    /// @notice Deploys and wires everything; the broadcaster must be `p.admin`.
    function deploy(Params memory p) public returns (Deployed memory d) {
        d.token = p.token == address(0) ? address(new MockStablecoin(p.admin)) : p.token;
        IERC20 token = IERC20(d.token);
        d.gpuRegistry = new GPURegistry(token, p.admin, p.minStake, p.unbondingPeriod);
        d.escrow = new PaymentEscrow(token, p.admin);
        d.taskRegistry = new TaskRegistry(
            d.gpuRegistry,
            d.escrow,
            p.admin,
            ITaskRegistry.Config({
                challengeWindow: p.challengeWindow,
                coordinatorFeeBps: p.coordinatorFeeBps,
                feeRecipient: p.feeRecipient,
                minStakeLock: p.minStakeLock,
                maxValueAtRisk: p.maxValueAtRisk
            })
        );
        d.verifierRegistry = new VerifierRegistry(
            token, address(d.escrow), p.admin, p.minVerifierStake, p.verifierUnbondingPeriod
        );
        d.randomness = new BlockRandomness();
        d.arbitration = new Arbitration(
            d.taskRegistry,
            d.gpuRegistry,
            d.escrow,
            d.verifierRegistry,
            d.randomness,
            p.admin,
            IArbitration.Config({
                disputeBond: p.disputeBond,
                votingPeriod: p.votingPeriod,
                verifierRewardBps: p.verifierRewardBps,
                auditRateBps: p.auditRateBps,
                jurorPenaltyBps: p.jurorPenaltyBps,
                noDecisionFeeBps: p.noDecisionFeeBps,
                baseJury: p.baseJury,
                auditRewardPerDay: p.auditRewardPerDay
            })
        );
        d.audits = new Audits(d.arbitration, d.taskRegistry, d.verifierRegistry, d.escrow, d.randomness);
        d.lineChallenges = new LineChallenges(d.taskRegistry, d.escrow, p.answerPeriod);

        d.gpuRegistry.grantRole(d.gpuRegistry.TASK_MANAGER_ROLE(), address(d.taskRegistry));
        d.gpuRegistry.grantRole(d.gpuRegistry.SLASHER_ROLE(), address(d.taskRegistry));
        d.escrow.grantRole(d.escrow.TASK_MANAGER_ROLE(), address(d.taskRegistry));
        d.escrow.grantRole(d.escrow.ARBITER_ROLE(), address(d.arbitration));
        d.taskRegistry.grantRole(d.taskRegistry.ARBITER_ROLE(), address(d.arbitration));
        // A line challenge holds a task as a dispute does, and pools the slashed locks.
        d.taskRegistry.grantRole(d.taskRegistry.ARBITER_ROLE(), address(d.lineChallenges));
        d.escrow.grantRole(d.escrow.ARBITER_ROLE(), address(d.lineChallenges));
        d.verifierRegistry.grantRole(d.verifierRegistry.ARBITER_ROLE(), address(d.arbitration));
        // The audits contract opens audit disputes, funds the audit pool, and locks each opener's seat until the
        // audit settles, paying its penalty to the audit pool when the miners were found correct.
        d.arbitration.grantRole(d.arbitration.AUDITS_ROLE(), address(d.audits));
        d.escrow.grantRole(d.escrow.ARBITER_ROLE(), address(d.audits));
        d.verifierRegistry.grantRole(d.verifierRegistry.ARBITER_ROLE(), address(d.audits));
        d.taskRegistry.grantRole(d.taskRegistry.COORDINATOR_ROLE(), p.coordinator);
        _handOverToTimelock(p, d);
    }

    /// @dev Every protocol contract's admin role moves to a timelock that the admin proposes to and executes
    /// through: parameter changes and role grants wait out `timelockDelay` in public (the timelock emits
    /// CallScheduled), so no one is surprised by them. Pausing stays immediate with the admin; a pause never
    /// traps money. The mock token keeps its admin (a devnet faucet).
    function _handOverToTimelock(Params memory p, Deployed memory d) internal {
        address[] memory admins = new address[](1);
        admins[0] = p.admin;
        d.timelock = new TimelockController(p.timelockDelay, admins, admins, address(0));
        IAccessControl[5] memory governed = [
            IAccessControl(address(d.gpuRegistry)),
            IAccessControl(address(d.escrow)),
            IAccessControl(address(d.taskRegistry)),
            IAccessControl(address(d.verifierRegistry)),
            IAccessControl(address(d.arbitration))
        ];
        for (uint256 i = 0; i < governed.length; ++i) {
            governed[i].grantRole(0x00, address(d.timelock));
            governed[i].renounceRole(0x00, p.admin);
        }
    }

    function _params(address broadcaster) internal view returns (Params memory p) {
        p.admin = broadcaster;
        p.coordinator = vm.envOr("COORDINATOR", broadcaster);
        p.feeRecipient = vm.envOr("FEE_RECIPIENT", p.coordinator);
        p.token = vm.envOr("TOKEN", address(0));
        p.minStake = vm.envOr("MIN_STAKE", uint256(100e6));
        p.unbondingPeriod = vm.envOr("UNBONDING_PERIOD", uint256(14 days));
        p.challengeWindow = vm.envOr("CHALLENGE_WINDOW", uint256(1 days));
        p.coordinatorFeeBps = vm.envOr("COORDINATOR_FEE_BPS", uint256(500));
        p.minStakeLock = vm.envOr("MIN_STAKE_LOCK", uint256(10e6));
        p.maxValueAtRisk = vm.envOr("MAX_VALUE_AT_RISK", uint256(900e6));
        p.disputeBond = vm.envOr("DISPUTE_BOND", uint256(5e6));
        p.votingPeriod = vm.envOr("VOTING_PERIOD", uint256(12 hours));
        p.verifierRewardBps = vm.envOr("VERIFIER_REWARD_BPS", uint256(1_000));
        p.minVerifierStake = vm.envOr("MIN_VERIFIER_STAKE", uint256(100e6));
        p.verifierUnbondingPeriod = vm.envOr("VERIFIER_UNBONDING_PERIOD", uint256(3 days));
        p.auditRateBps = vm.envOr("AUDIT_RATE_BPS", uint256(1_000));
        p.jurorPenaltyBps = vm.envOr("JUROR_PENALTY_BPS", uint256(5_000));
        p.noDecisionFeeBps = vm.envOr("NO_DECISION_FEE_BPS", uint256(2_000));
        p.baseJury = vm.envOr("BASE_JURY", uint256(5));
        p.auditRewardPerDay = vm.envOr("AUDIT_REWARD_PER_DAY", uint256(50e6));
        p.timelockDelay = vm.envOr("TIMELOCK_DELAY", uint256(2 days));
        p.answerPeriod = vm.envOr("ANSWER_PERIOD", uint256(6 hours));
    }

    function _write(Params memory p, Deployed memory d, uint256 startBlock) internal {
        string memory c = "contracts";
        vm.serializeAddress(c, "token", d.token);
        vm.serializeAddress(c, "gpu_registry", address(d.gpuRegistry));
        vm.serializeAddress(c, "payment_escrow", address(d.escrow));
        vm.serializeAddress(c, "task_registry", address(d.taskRegistry));
        vm.serializeAddress(c, "verifier_registry", address(d.verifierRegistry));
        vm.serializeAddress(c, "arbitration", address(d.arbitration));
        vm.serializeAddress(c, "audits", address(d.audits));
        vm.serializeAddress(c, "randomness", address(d.randomness));
        string memory contracts = vm.serializeAddress(c, "line_challenges", address(d.lineChallenges));

        string memory r = "roles";
        vm.serializeAddress(r, "admin", p.admin);
        vm.serializeAddress(r, "coordinator", p.coordinator);
        vm.serializeAddress(r, "timelock", address(d.timelock));
        string memory roles = vm.serializeAddress(r, "fee_recipient", p.feeRecipient);

        string memory root = "deployment";
        vm.serializeUint(root, "chain_id", block.chainid);
        vm.serializeUint(root, "block", startBlock);
        vm.serializeString(root, "roles", roles);
        string memory json = vm.serializeString(root, "contracts", contracts);
        string memory path =
            vm.envOr("DEPLOYMENT_FILE", string.concat("deployments/", vm.toString(block.chainid), ".json"));
        vm.writeJson(json, path);
    }
}
