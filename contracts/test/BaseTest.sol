// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Deploy} from "../script/Deploy.s.sol";
import {MockStablecoin} from "../src/MockStablecoin.sol";
import {GPURegistry} from "../src/GPURegistry.sol";
import {PaymentEscrow} from "../src/PaymentEscrow.sol";
import {TaskRegistry} from "../src/TaskRegistry.sol";
import {Arbitration} from "../src/Arbitration.sol";
import {VerifierRegistry} from "../src/VerifierRegistry.sol";
import {LineChallenges} from "../src/LineChallenges.sol";
import {Audits} from "../src/Audits.sol";
import {BlockRandomness} from "../src/BlockRandomness.sol";
import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {IGPURegistry} from "../src/interfaces/IGPURegistry.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {IArbitration} from "../src/interfaces/IArbitration.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {ResultTree} from "./utils/ResultTree.sol";
import {Consent} from "./utils/Consent.sol";
import {Headers} from "./utils/Headers.sol";

/// @notice Runs the deploy script's `deploy` as `run` does: creations and role grants are broadcast from `p.admin`.
contract DeployHarness is Deploy {
    function deployAs(Params memory p) external returns (Deployed memory d) {
        vm.startBroadcast(p.admin);
        d = deploy(p);
        vm.stopBroadcast();
    }

    /// @notice The parameters `run` deploys with when no environment variable overrides them.
    function defaults(address broadcaster) external view returns (Params memory) {
        return _params(broadcaster);
    }
}

/// @notice Deploys the market through the deploy script; helpers for every step of a task's life.
abstract contract BaseTest is Consent {
    // The deploy script's defaults.
    uint256 internal constant MIN_STAKE = 100e6;
    uint256 internal constant UNBONDING = 14 days;
    uint256 internal constant CHALLENGE_WINDOW = 1 days;
    uint256 internal constant FEE_BPS = 500;
    uint256 internal constant MIN_STAKE_LOCK = 10e6;
    uint128 internal constant STAKE_LOCK = 10e6;
    uint256 internal constant DISPUTE_BOND = 5e6;
    uint256 internal constant VOTING_PERIOD = 12 hours;
    uint256 internal constant MAX_VALUE_AT_RISK = 900e6;
    uint256 internal constant PENALTY_BPS = 5_000;
    uint256 internal constant NO_DECISION_FEE_BPS = 2_000;
    uint256 internal constant BASE_JURY = 5;
    uint256 internal constant AUDIT_REWARD_PER_DAY = 50e6;
    uint256 internal constant TIMELOCK_DELAY = 2 days;
    uint256 internal constant REWARD_BPS = 1_000;
    uint256 internal constant MIN_VERIFIER_STAKE = 100e6;
    uint256 internal constant VERIFIER_UNBONDING = 3 days;
    uint256 internal constant AUDIT_RATE_BPS = 1_000;
    uint256 internal constant ANSWER_PERIOD = 6 hours;

    uint64 internal constant T0 = 1_700_000_000;
    uint256 internal constant MINER_STAKE = 500e6;
    uint128 internal constant MAX_PRICE = 100e6;
    /// @dev The fee and the miners' split both round.
    uint128 internal constant PAYMENT = 77_777_777;
    /// @dev One per standard leaf: the results tree holds exactly one leaf per request.
    uint32 internal constant REQUESTS = 4;
    uint64 internal constant TASK_DURATION = 7 days;
    uint64 internal constant INPUT_TOKENS = 123_456;
    uint64 internal constant OUTPUT_TOKENS = 654_321;
    /// @dev Chosen so that INPUT_TOKENS and OUTPUT_TOKENS cost exactly PAYMENT, rounded down from 77,777,777.16.
    uint128 internal constant INPUT_PRICE = 100_000_625;
    uint128 internal constant OUTPUT_PRICE = 100_000_000;
    uint256 internal constant MINER_COUNT = 4;
    uint256 internal constant VERIFIER_COUNT = 4;

    bytes32 internal constant MODEL = "llama-3.1-8b-instruct";
    bytes32 internal constant OTHER_MODEL = "mistral-7b-instruct";
    bytes32 internal constant UNSUPPORTED_MODEL = "gpt-oss-120b";
    bytes32 internal constant INPUT_ROOT = keccak256("input root");
    bytes32 internal constant PARAMS_HASH = keccak256("params");

    bytes32 internal constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 internal constant COMMITMENT_TYPEHASH = keccak256(
        "ResultCommitment(uint256 taskId,uint32 requestCount,address[] miners,address miner,bytes32 resultsRoot,uint64 inputTokens,uint64 outputTokens,uint128 payment,uint256[] minerAmounts,bytes32[] servedRoots)"
    );

    address internal admin = makeAddr("admin");
    /// @dev The deployment's timelock, which holds every protocol contract's admin role. Tests of a setter act as
    /// it directly; test_deploy_adminActsOnlyThroughTheTimelock shows the delay itself.
    address internal governor;
    address internal coordinator = makeAddr("coordinator");
    address internal feeRecipient = makeAddr("feeRecipient");
    address internal alice = makeAddr("alice");
    address internal bob = makeAddr("bob");
    address internal stranger = makeAddr("stranger");

    Deploy.Params internal params;
    DeployHarness internal deployer;
    MockStablecoin internal token;
    GPURegistry internal registry;
    PaymentEscrow internal escrow;
    TaskRegistry internal tasks;
    VerifierRegistry internal verifierRegistry;
    Arbitration internal arbitration;
    LineChallenges internal challenges;
    Audits internal audits;
    BlockRandomness internal randomness;

    address[] internal miners;
    uint256[] internal signerKeys;
    address[] internal verifiers;

    function setUp() public virtual {
        vm.warp(T0);
        params = defaultParams();
        deployer = new DeployHarness();
        Deploy.Deployed memory d = deployer.deployAs(params);
        token = MockStablecoin(d.token);
        registry = d.gpuRegistry;
        escrow = d.escrow;
        tasks = d.taskRegistry;
        arbitration = d.arbitration;
        challenges = d.lineChallenges;
        audits = d.audits;
        randomness = d.randomness;
        verifierRegistry = d.verifierRegistry;
        governor = address(d.timelock);
        vm.label(address(verifierRegistry), "VerifierRegistry");
        vm.label(address(token), "token");
        vm.label(address(registry), "GPURegistry");
        vm.label(address(escrow), "PaymentEscrow");
        vm.label(address(tasks), "TaskRegistry");
        vm.label(address(arbitration), "Arbitration");
        vm.label(address(challenges), "LineChallenges");
        vm.label(address(audits), "Audits");

        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            miners.push(makeAddr(string.concat("miner", vm.toString(i))));
            (, uint256 key) = makeAddrAndKey(string.concat("signer", vm.toString(i)));
            signerKeys.push(key);
        }
        for (uint256 i = 0; i < VERIFIER_COUNT; ++i) {
            address v = makeAddr(string.concat("verifier", vm.toString(i)));
            verifiers.push(v);
            _registerVerifier(v);
        }
        // Registrations take effect from the next block: disputes opened from now on may take their votes.
        vm.roll(block.number + 1);
    }

    function defaultParams() internal view returns (Deploy.Params memory p) {
        p.admin = admin;
        p.coordinator = coordinator;
        p.feeRecipient = feeRecipient;
        p.token = address(0);
        p.minStake = MIN_STAKE;
        p.unbondingPeriod = UNBONDING;
        p.challengeWindow = CHALLENGE_WINDOW;
        p.coordinatorFeeBps = FEE_BPS;
        p.minStakeLock = MIN_STAKE_LOCK;
        p.maxValueAtRisk = MAX_VALUE_AT_RISK;
        p.disputeBond = DISPUTE_BOND;
        p.votingPeriod = VOTING_PERIOD;
        p.verifierRewardBps = REWARD_BPS;
        p.minVerifierStake = MIN_VERIFIER_STAKE;
        p.verifierUnbondingPeriod = VERIFIER_UNBONDING;
        p.auditRateBps = AUDIT_RATE_BPS;
        p.jurorPenaltyBps = PENALTY_BPS;
        p.noDecisionFeeBps = NO_DECISION_FEE_BPS;
        p.baseJury = BASE_JURY;
        p.auditRewardPerDay = AUDIT_REWARD_PER_DAY;
        p.timelockDelay = TIMELOCK_DELAY;
        p.answerPeriod = ANSWER_PERIOD;
    }

    // ---- money

    function _mint(address to, uint256 amount) internal {
        vm.prank(admin);
        token.mint(to, amount);
    }

    function _fund(address who, address spender, uint256 amount) internal {
        _mint(who, amount);
        vm.prank(who);
        token.approve(spender, amount);
    }

    // ---- governance

    /// @dev Audits `bps` of the tasks created from the next second on (and moves to that second).
    function _setAuditRate(uint256 bps) internal {
        IArbitration.Config memory c = arbitration.config();
        c.auditRateBps = bps;
        vm.prank(governor);
        arbitration.setConfig(c);
        vm.warp(block.timestamp + 1);
    }

    // ---- verifiers

    /// @dev Stakes the minimum (one seat of weight); the verifier can be drawn for rounds opened later.
    function _registerVerifier(address v) internal {
        _registerVerifier(v, verifierRegistry.minStake());
    }

    /// @dev Stakes `stake` to judge MODEL, the model of every task these tests create.
    function _registerVerifier(address v, uint256 stake) internal {
        _registerVerifier(v, stake, _models(MODEL));
    }

    function _registerVerifier(address v, uint256 stake, bytes32[] memory models) internal {
        _fund(v, address(verifierRegistry), stake);
        vm.prank(v);
        verifierRegistry.register(stake, models);
    }

    /// @dev `[model]`: the list of one model a registration takes.
    function _models(bytes32 model) internal pure returns (bytes32[] memory models) {
        models = new bytes32[](1);
        models[0] = model;
    }

    /// @dev `[a, b]`: the list of two models a registration takes.
    function _two(bytes32 a, bytes32 b) internal pure returns (bytes32[] memory list) {
        list = new bytes32[](2);
        (list[0], list[1]) = (a, b);
    }

    /// @dev A verifier's stake now.
    function _stake(address v) internal view returns (uint256) {
        return verifierRegistry.verifierOf(v).stake;
    }

    /// @dev A verifier's stake held by seats and audit deposits now.
    function _lockedOf(address v) internal view returns (uint256) {
        return verifierRegistry.verifierOf(v).locked;
    }

    /// @dev Dispute `d`'s status now.
    function _statusOf(uint256 d) internal view returns (IArbitration.DisputeStatus) {
        return arbitration.getDispute(d).status;
    }

    /// @dev `count` verifiers named `name`0.. of `seatsEach` seats each, able to sit from the next block on.
    function _newVerifiers(string memory name, uint256 count, uint256 seatsEach)
        internal
        returns (address[] memory list)
    {
        list = new address[](count);
        for (uint256 i = 0; i < count; ++i) {
            list[i] = makeAddr(string.concat(name, vm.toString(i)));
            _registerVerifier(list[i], seatsEach * MIN_VERIFIER_STAKE);
        }
        vm.roll(block.number + 1);
    }

    /// @dev Funds the audit pool, draws the task's audit and seals it with a fixed seed (every task selected at
    /// a rate of 10,000 bps); returns the audited line.
    function _selectedAudit(uint256 id) internal returns (uint256 line) {
        _fund(bob, address(escrow), 10 * DISPUTE_BOND);
        vm.prank(bob);
        audits.fundAuditPool(10 * DISPUTE_BOND);
        audits.drawAudit(id);
        _mineSeed(id, keccak256("audit draw"));
        assertTrue(audits.sealAudit(id));
        line = audits.auditOf(id).requestIndex;
    }

    /// @dev A committed task of four requests (one standard leaf each), so that any audited line has a leaf,
    /// every one of them audited.
    function _auditableTask() internal returns (uint256 id) {
        _setAuditRate(10_000);
        id = _fourLineTask();
    }

    /// @dev A committed task of four requests, one standard leaf each (line 0 [m0, m1], line 1 [m2], line 2
    /// [m0, m1, m2], line 3 no one), under the audit rate in force.
    function _fourLineTask() internal returns (uint256 id) {
        ITaskRegistry.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.requestCount = 4;
        return _committedTaskWith(alice, p);
    }

    /// @dev The task of `p`, funded by `owner`, assigned to miners 0..2 (they serve MODEL and OTHER_MODEL), the
    /// standard leaves committed.
    function _committedTaskWith(address owner, ITaskRegistry.CreateTaskParams memory p)
        internal
        returns (uint256 id)
    {
        _fund(owner, address(escrow), p.maxPrice);
        vm.prank(owner);
        id = tasks.createTask(p);
        _assign(id, _miners(3));
        _commitLeaves(id, _standardLeaves(id));
    }

    /// @dev The standard committed task (MAX_PRICE, the test prices) of `model`, owned by `owner`.
    function _committedTaskOf(address owner, bytes32 model) internal returns (uint256) {
        ITaskRegistry.CreateTaskParams memory p = _taskParams(MAX_PRICE);
        p.modelId = model;
        return _committedTaskWith(owner, p);
    }

    function _openAudit(uint256 id, address auditor) internal returns (uint256) {
        uint256 line = audits.auditOf(id).requestIndex;
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(id);
        vm.prank(auditor);
        return audits.openAudit(id, leaves[line], _proofOf(leaves, line), _servedProofs(leaves, line));
    }

    /// @dev Draws and seals task `id`'s audit with the first hash of a fixed sequence whose seed is selected and
    /// picks `line` (luck, or a grinding block builder where it could).
    function _selectLine(uint256 id, uint32 line) internal {
        audits.drawAudit(id);
        uint256 seedBlock = audits.auditOf(id).seedBlock;
        vm.roll(seedBlock + 1);
        uint256 rate = arbitration.configOf(id).auditRateBps;
        for (uint256 salt = 0;; ++salt) {
            bytes32 hash = keccak256(abi.encode("grind", salt));
            bytes32 seed = keccak256(abi.encode(hash, id));
            if (uint256(seed) % 10_000 >= rate) continue;
            if (uint256(keccak256(abi.encode(seed, uint256(1)))) % 4 != line) continue;
            _setSeed(seedBlock, hash);
            break;
        }
        assertTrue(audits.sealAudit(id));
        assertEq(audits.auditOf(id).requestIndex, line);
    }

    /// @dev Mines task `id`'s audit seed block and proves `value` as its random value.
    function _mineSeed(uint256 id, bytes32 value) internal {
        uint256 seedBlock = audits.auditOf(id).seedBlock;
        vm.roll(seedBlock + 1);
        _setSeed(seedBlock, value);
    }

    // ---- miners

    function _signer(uint256 i) internal view returns (address) {
        return vm.addr(signerKeys[i]);
    }

    function _profile(address signer) internal pure returns (IGPURegistry.MinerProfile memory p) {
        bytes32[] memory models = new bytes32[](2);
        models[0] = MODEL;
        models[1] = OTHER_MODEL;
        p = IGPURegistry.MinerProfile({
            signer: signer,
            gpuClass: "H100-80GB",
            vramGb: 80,
            gpuCount: 8,
            region: "us-east-1",
            priceFloor: 2e6,
            endpoint: "https://miner.example:8443",
            modelIds: models
        });
    }

    function _register(uint256 i, uint256 stake) internal {
        _fund(miners[i], address(registry), stake);
        vm.prank(miners[i]);
        registry.register(_profile(_signer(i)), stake);
    }

    function _registerAll() internal {
        for (uint256 i = 0; i < MINER_COUNT; ++i) {
            _register(i, MINER_STAKE);
        }
    }

    function _miners(uint256 count) internal view returns (address[] memory list) {
        list = new address[](count);
        for (uint256 i = 0; i < count; ++i) {
            list[i] = miners[i];
        }
    }

    /// @dev Signer keys of miners a test registers beside the standard ones.
    mapping(address miner => uint256) internal extraSignerKeys;

    /// @dev The signer key of a standard or extra miner; for anyone else a key that is no one's signer.
    function _keyOf(address miner) internal view override returns (uint256) {
        for (uint256 i = 0; i < miners.length; ++i) {
            if (miners[i] == miner) return signerKeys[i];
        }
        uint256 extra = extraSignerKeys[miner];
        return extra != 0 ? extra : uint256(keccak256(abi.encode("not a signer", miner))) % (2 ** 255);
    }

    // ---- tasks

    function _taskParams(uint128 maxPrice) internal view returns (ITaskRegistry.CreateTaskParams memory) {
        return ITaskRegistry.CreateTaskParams({
            modelId: MODEL,
            inputRoot: INPUT_ROOT,
            requestCount: REQUESTS,
            paramsHash: PARAMS_HASH,
            maxPrice: maxPrice,
            deadline: uint64(block.timestamp) + TASK_DURATION,
            inputPricePerMillion: INPUT_PRICE,
            outputPricePerMillion: OUTPUT_PRICE
        });
    }

    function _createTask(address owner, uint128 maxPrice) internal returns (uint256) {
        _fund(owner, address(escrow), maxPrice);
        vm.prank(owner);
        return tasks.createTask(_taskParams(maxPrice));
    }

    function _assign(uint256 taskId, address[] memory list) internal {
        vm.prank(coordinator);
        tasks.assignTask(taskId, list, STAKE_LOCK, _acceptances(tasks, taskId, list, STAKE_LOCK));
    }

    function _assignedTask(address owner, uint256 minerCount) internal returns (uint256 taskId) {
        taskId = _createTask(owner, MAX_PRICE);
        _assign(taskId, _miners(minerCount));
    }

    function _fee(uint256 payment) internal pure returns (uint256) {
        return payment * FEE_BPS / 10_000;
    }

    /// @dev `total` in `n` equal parts, dust to the first.
    function _split(uint256 total, uint256 n) internal pure returns (uint256[] memory parts) {
        parts = new uint256[](n);
        if (n == 0) return parts;
        for (uint256 i = 0; i < n; ++i) {
            parts[i] = total / n;
        }
        parts[0] += total % n;
    }

    /// @dev A usage that costs exactly `payment` at the test prices (below the maximum price): the standard usage
    /// for PAYMENT, else output tokens only, which cost 100 each.
    function _usageFor(uint128 payment) internal pure returns (uint64 inputTokens, uint64 outputTokens) {
        if (payment == PAYMENT) return (INPUT_TOKENS, OUTPUT_TOKENS);
        require(payment % 100 == 0, "BaseTest: no usage costs this payment");
        return (0, uint64(payment / 100));
    }

    /// @dev A commitment of `root` for `payment`, with a usage that costs that (see `_usageFor`).
    function _commitment(bytes32 root, uint128 payment, uint256 minerCount)
        internal
        pure
        returns (ITaskRegistry.Commitment memory c)
    {
        (uint64 inputTokens, uint64 outputTokens) = _usageFor(payment);
        c = ITaskRegistry.Commitment({
            resultsRoot: root,
            inputTokens: inputTokens,
            outputTokens: outputTokens,
            payment: payment,
            minerAmounts: _split(payment - _fee(payment), minerCount),
            servedRoots: new bytes32[](minerCount)
        });
    }

    /// @dev The EIP-712 digest, computed from the spec, not read from the contract (the task's request count and
    /// assigned miners are read from its record).
    function _digest(uint256 taskId, ITaskRegistry.Commitment memory c, address miner)
        internal
        view
        returns (bytes32)
    {
        return _digestFor(
            address(tasks), taskId, tasks.getTask(taskId).requestCount, tasks.minersOf(taskId), c, miner
        );
    }

    /// @dev The digest of `c` signed by `miner` for task `taskId` of `requestCount` requests assigned to
    /// `assigned`, at `registry`.
    function _digestFor(
        address registry,
        uint256 taskId,
        uint32 requestCount,
        address[] memory assigned,
        ITaskRegistry.Commitment memory c,
        address miner
    ) internal view returns (bytes32) {
        bytes32 domain = keccak256(
            abi.encode(
                DOMAIN_TYPEHASH,
                keccak256("BatchMarket TaskRegistry"),
                keccak256("1"),
                block.chainid,
                registry
            )
        );
        bytes memory head = abi.encode(
            COMMITMENT_TYPEHASH, taskId, requestCount, keccak256(abi.encodePacked(assigned)), miner
        );
        bytes memory tail = abi.encode(
            c.resultsRoot,
            c.inputTokens,
            c.outputTokens,
            c.payment,
            keccak256(abi.encodePacked(c.minerAmounts)),
            keccak256(abi.encodePacked(c.servedRoots))
        );
        return keccak256(abi.encodePacked("\x19\x01", domain, keccak256(bytes.concat(head, tail))));
    }

    function _signDigest(uint256 key, bytes32 digest) internal pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(key, digest);
        return abi.encodePacked(r, s, v);
    }

    /// @dev One signature per assigned miner, by its registered signer's key, over its own served root.
    function _signatures(uint256 taskId, ITaskRegistry.Commitment memory c)
        internal
        view
        returns (bytes[] memory)
    {
        return _signaturesOf(taskId, c, tasks.minersOf(taskId));
    }

    function _signaturesOf(uint256 taskId, ITaskRegistry.Commitment memory c, address[] memory assigned)
        internal
        view
        returns (bytes[] memory sigs)
    {
        sigs = new bytes[](assigned.length);
        for (uint256 i = 0; i < assigned.length; ++i) {
            sigs[i] = _signDigest(_keyOf(assigned[i]), _digest(taskId, c, assigned[i]));
        }
    }

    function _commit(uint256 taskId, ITaskRegistry.Commitment memory c) internal {
        bytes[] memory sigs = _signatures(taskId, c);
        vm.prank(coordinator);
        tasks.commitResults(taskId, c, sigs);
    }

    // ---- leaves

    function _leaf(uint256 taskId, uint32 index, address[] memory pipeline)
        internal
        pure
        returns (ResultLeaf.Leaf memory)
    {
        return ResultLeaf.Leaf({
            taskId: taskId,
            requestIndex: index,
            customIdHash: keccak256(abi.encode("custom", index)),
            inputHash: keccak256(abi.encode("input", index)),
            outputHash: keccak256(abi.encode("output", index)),
            inputTokens: pipeline.length == 0 ? 0 : 41_151 + index,
            outputTokens: pipeline.length == 0 ? 0 : 218_106 + index,
            pipeline: pipeline
        });
    }

    /// @dev Leaf 0 served by [m0, m1], leaf 1 by [m2], leaf 2 by [m0, m1, m2], leaf 3 by no one (no tokens). Their
    /// usage adds up to INPUT_TOKENS and OUTPUT_TOKENS, so they cost PAYMENT.
    function _standardLeaves(uint256 taskId) internal view returns (ResultLeaf.Leaf[] memory leaves) {
        leaves = new ResultLeaf.Leaf[](4);
        leaves[0] = _leaf(taskId, 0, _pair(miners[0], miners[1]));
        address[] memory one = new address[](1);
        one[0] = miners[2];
        leaves[1] = _leaf(taskId, 1, one);
        leaves[2] = _leaf(taskId, 2, _miners(3));
        leaves[3] = _leaf(taskId, 3, new address[](0));
    }

    function _one(address a) internal pure returns (address[] memory list) {
        list = new address[](1);
        list[0] = a;
    }

    function _pair(address a, address b) internal pure returns (address[] memory list) {
        list = new address[](2);
        list[0] = a;
        list[1] = b;
    }

    function _rootOf(ResultLeaf.Leaf[] memory leaves) internal pure returns (bytes32) {
        return ResultTree.root(leaves);
    }

    function _proofOf(ResultLeaf.Leaf[] memory leaves, uint256 index)
        internal
        pure
        returns (bytes32[] memory)
    {
        return ResultTree.proof(leaves, index);
    }

    /// @dev For each miner of `leaves[index]`'s pipeline, the proof of that leaf in its served tree.
    function _servedProofs(ResultLeaf.Leaf[] memory leaves, uint256 index)
        internal
        pure
        returns (bytes32[][] memory)
    {
        return ResultTree.servedProofs(leaves, index);
    }

    /// @dev Commits `leaves` honestly (`_honestCommitment`), every assigned miner signing.
    function _commitLeaves(uint256 taskId, ResultLeaf.Leaf[] memory leaves) internal {
        _commit(taskId, _honestCommitment(taskId, leaves));
    }

    /// @dev The honest commitment of `leaves`: their positional sum root, the usage they add up to at its price
    /// (PAYMENT for the standard leaves), split evenly, and every assigned miner's served root.
    function _honestCommitment(uint256 taskId, ResultLeaf.Leaf[] memory leaves)
        internal
        view
        returns (ITaskRegistry.Commitment memory)
    {
        (uint64 inputTokens, uint64 outputTokens) = ResultTree.usage(leaves);
        uint128 payment = tasks.priceOf(taskId, inputTokens, outputTokens);
        address[] memory assigned = tasks.minersOf(taskId);
        return ITaskRegistry.Commitment({
            resultsRoot: _rootOf(leaves),
            inputTokens: inputTokens,
            outputTokens: outputTokens,
            payment: payment,
            minerAmounts: _split(payment - _fee(payment), assigned.length),
            servedRoots: ResultTree.servedRoots(leaves, assigned)
        });
    }

    // ---- commits that leave miners out, and line challenges

    /// @dev Commits `c` for task `id` signed by the miners in `signers` (bit i: miner i) only; every other slot is
    /// left empty (no served root, paid nothing), as only the task's coordinator may. The miners' part is split
    /// among the signers.
    function _commitSignedBy(uint256 id, ITaskRegistry.Commitment memory c, uint256 signers) internal {
        uint256 count = c.minerAmounts.length;
        uint256 signerCount;
        for (uint256 i = 0; i < count; ++i) {
            if (signers & (1 << i) != 0) ++signerCount;
        }
        uint256[] memory shares = _split(c.payment - _fee(c.payment), signerCount);
        uint256 next;
        for (uint256 i = 0; i < count; ++i) {
            if (signers & (1 << i) != 0) {
                c.minerAmounts[i] = shares[next++];
            } else {
                c.minerAmounts[i] = 0;
                c.servedRoots[i] = bytes32(0);
            }
        }
        bytes[] memory sigs = new bytes[](count);
        for (uint256 i = 0; i < count; ++i) {
            if (signers & (1 << i) != 0) {
                sigs[i] = _signDigest(_keyOf(miners[i]), _digest(id, c, miners[i]));
            }
        }
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);
    }

    /// @dev Owner alice challenges position `index` of task `id` (no external call before the prank, so an
    /// expectRevert sees the challenge itself).
    function _challenge(uint256 id, uint256 index) internal {
        vm.prank(alice);
        challenges.challengeLine(id, index);
    }

    function _answer(uint256 id, ResultLeaf.Leaf[] memory leaves, uint256 index) internal {
        vm.prank(stranger);
        challenges.answerLine(id, leaves[index], _proofOf(leaves, index), _servedProofs(leaves, index));
    }

    // ---- a coordinator that withholds the commit

    /// @dev The honest commitment of task `id`'s standard leaves: what its miners served and signed.
    function _signedWork(uint256 id) internal view returns (ITaskRegistry.Commitment memory) {
        return _honestCommitment(id, _standardLeaves(id));
    }

    /// @dev Every assigned miner vouches on-chain for `c`, by its own address or by the signer it accepted the
    /// task with, in turn.
    function _vouchAll(uint256 id, ITaskRegistry.Commitment memory c) internal {
        address[] memory assigned = tasks.minersOf(id);
        for (uint256 i = 0; i < assigned.length; ++i) {
            vm.prank(i % 2 == 0 ? assigned[i] : _signer(i));
            tasks.vouchResults(id, c);
        }
    }

    /// @dev The coordinator announces the release of task `id`, waits out the notice, and is refused: a miner
    /// vouched.
    function _releaseRefusedAfterNotice(uint256 id) internal {
        vm.prank(coordinator);
        tasks.requestRelease(id);
        skip(tasks.RELEASE_NOTICE());
        vm.prank(coordinator);
        vm.expectRevert(abi.encodeWithSelector(ITaskRegistry.TaskVouched.selector, id));
        tasks.releaseTask(id);
    }

    /// @dev At the end of its challenge window (as extended), task `id` (miners 0..2, owner alice) finalized:
    /// every miner is paid exactly its committed amount in `c` and unlocked, the coordinator its fee, the owner
    /// the rest.
    function _assertPaid(uint256 id, ITaskRegistry.Commitment memory c) internal {
        vm.warp(tasks.challengeEndsAt(id));
        tasks.finalizeTask(id);
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(escrow.balanceOf(miners[i]), c.minerAmounts[i], "each miner its committed amount");
            assertEq(_locked(miners[i]), 0);
            assertEq(_free(miners[i]), MINER_STAKE);
        }
        assertEq(escrow.balanceOf(feeRecipient), _fee(c.payment));
        assertEq(escrow.balanceOf(alice), MAX_PRICE - c.payment, "the owner pays the usage, no more");
        _assertEscrowSolvent();
    }

    /// @dev Task of miners 0..2 and owner alice ended unpaid: alice has her whole escrow back, every miner is
    /// unlocked with its whole stake and paid nothing.
    function _assertRefundedInFull() internal view {
        assertEq(escrow.balanceOf(alice), MAX_PRICE);
        for (uint256 i = 0; i < 3; ++i) {
            assertEq(escrow.balanceOf(miners[i]), 0, "miner unpaid");
            assertEq(_locked(miners[i]), 0, "miner unlocked");
            assertEq(_free(miners[i]), MINER_STAKE, "miner keeps its stake");
        }
        _assertEscrowSolvent();
    }

    function _in(address[] memory list, address item) internal pure returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == item) return true;
        }
        return false;
    }

    /// @dev The standard leaves committed with `extraOutput` more output tokens than they hold, at that usage's
    /// price, every miner signing: what a coordinator and miners colluding to overcharge would commit.
    function _overchargedTask(uint64 extraOutput)
        internal
        returns (uint256 id, ResultLeaf.Leaf[] memory leaves)
    {
        id = _assignedTask(alice, 3);
        leaves = _standardLeaves(id);
        ITaskRegistry.Commitment memory c = _commitment(_rootOf(leaves), PAYMENT, 3);
        c.outputTokens += extraOutput;
        c.payment = tasks.priceOf(id, c.inputTokens, c.outputTokens);
        c.minerAmounts = _split(c.payment - _fee(c.payment), 3);
        c.servedRoots = ResultTree.servedRoots(leaves, tasks.minersOf(id));
        _commit(id, c);
    }

    /// @dev A task for MAX_PRICE, assigned to miners 0..2, standard leaves committed for PAYMENT.
    function _committedTask(address owner) internal returns (uint256 taskId) {
        taskId = _assignedTask(owner, 3);
        _commitLeaves(taskId, _standardLeaves(taskId));
    }

    // ---- disputes

    function _openDispute(uint256 taskId, uint256 leafIndex) internal returns (uint256) {
        ResultLeaf.Leaf[] memory leaves = _standardLeaves(taskId);
        address owner = tasks.getTask(taskId).owner;
        _fund(owner, address(escrow), arbitration.disputeBond());
        vm.prank(owner);
        return arbitration.openDispute(
            taskId, leaves[leafIndex], _proofOf(leaves, leafIndex), _servedProofs(leaves, leafIndex)
        );
    }

    // ---- juries

    function _round(uint256 disputeId) internal view returns (uint8 r, IArbitration.Round memory round) {
        r = arbitration.getDispute(disputeId).round;
        round = arbitration.roundOf(disputeId, r);
    }

    /// @dev Mines the seed block, proves its randomness and draws the current round's jury; returns its jurors.
    function _drawJury(uint256 disputeId) internal returns (address[] memory jurors) {
        (uint8 r, IArbitration.Round memory round) = _round(disputeId);
        if (block.number <= round.seedBlock) vm.roll(round.seedBlock + 1);
        if (randomness.valueOf(round.seedBlock) == 0) {
            _setSeed(round.seedBlock, keccak256(abi.encode("seed", disputeId, r)));
        }
        arbitration.drawJury(disputeId);
        jurors = arbitration.jurorsOf(disputeId, r);
    }

    /// @dev Makes `value` the proven random value of past block `number`: a header with that mix hash becomes
    /// the block's (forge leaves past hashes empty unless set) and is proven to the randomness contract.
    function _setSeed(uint256 number, bytes32 value) internal {
        bytes memory header = Headers.withMixHash(value);
        vm.setBlockhash(number, keccak256(header));
        randomness.prove(number, header);
    }

    function _salt(address juror) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", juror));
    }

    function _commitVote(uint256 disputeId, address juror, IArbitration.Vote choice) internal {
        uint8 r = arbitration.getDispute(disputeId).round;
        bytes32 commitment = arbitration.voteCommitment(disputeId, r, juror, choice, _salt(juror));
        vm.prank(juror);
        arbitration.commitVote(disputeId, commitment);
    }

    function _revealVote(uint256 disputeId, address juror, IArbitration.Vote choice) internal {
        vm.prank(juror);
        arbitration.revealVote(disputeId, choice, _salt(juror));
    }

    /// @dev Draws the current round, has every juror commit and reveal `choice` (None: stays silent), and
    /// warps to the end of the reveal phase.
    function _runRound(uint256 disputeId, IArbitration.Vote choice)
        internal
        returns (address[] memory jurors)
    {
        jurors = _drawJury(disputeId);
        IArbitration.Vote[] memory votes = new IArbitration.Vote[](jurors.length);
        for (uint256 i = 0; i < jurors.length; ++i) {
            votes[i] = choice;
        }
        _runRoundWith(disputeId, jurors, votes);
    }

    /// @dev Commits and reveals `votes[i]` for `jurors[i]` in the drawn current round, then warps past reveal.
    function _runRoundWith(uint256 disputeId, address[] memory jurors, IArbitration.Vote[] memory votes)
        internal
    {
        for (uint256 i = 0; i < jurors.length; ++i) {
            if (votes[i] != IArbitration.Vote.None) _commitVote(disputeId, jurors[i], votes[i]);
        }
        (, IArbitration.Round memory round) = _round(disputeId);
        vm.warp(round.commitDeadline);
        for (uint256 i = 0; i < jurors.length; ++i) {
            if (votes[i] != IArbitration.Vote.None) _revealVote(disputeId, jurors[i], votes[i]);
        }
        vm.warp(round.revealDeadline);
    }

    /// @dev `who` funds twice the current round's bond and appeals; returns the bond it posted.
    function _appeal(uint256 disputeId, address who) internal returns (uint256 bond) {
        (, IArbitration.Round memory round) = _round(disputeId);
        bond = round.bond * 2;
        _fund(who, address(escrow), bond);
        vm.prank(who);
        arbitration.appeal(disputeId);
    }

    /// @dev Warps past the current round's appeal phase, so `resolve` may run.
    function _warpPastAppeal(uint256 disputeId) internal {
        (, IArbitration.Round memory round) = _round(disputeId);
        vm.warp(round.appealDeadline);
    }

    /// @dev One round with every juror voting `choice`, then resolved.
    function _decide(uint256 disputeId, IArbitration.Vote choice) internal returns (address[] memory jurors) {
        jurors = _runRound(disputeId, choice);
        _warpPastAppeal(disputeId);
        arbitration.resolve(disputeId);
    }

    function _seats(uint256 disputeId, uint8 r, address juror) internal view returns (uint256) {
        return arbitration.jurorOf(disputeId, r, juror).seats;
    }

    // ---- views

    function _status(uint256 taskId) internal view returns (ITaskRegistry.TaskStatus) {
        return tasks.getTask(taskId).status;
    }

    function _free(address miner) internal view returns (uint256) {
        return registry.stakeOf(miner).free;
    }

    function _locked(address miner) internal view returns (uint256) {
        return registry.stakeOf(miner).locked;
    }

    function _assertEscrowSolvent() internal view {
        assertEq(token.balanceOf(address(escrow)), escrow.totalLiabilities(), "escrow balance != liabilities");
    }

    function _unauthorized(address account, bytes32 role) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, account, role);
    }

    function _wrongStatus(uint256 taskId, ITaskRegistry.TaskStatus actual, ITaskRegistry.TaskStatus expected)
        internal
        pure
        returns (bytes memory)
    {
        return abi.encodeWithSelector(ITaskRegistry.WrongStatus.selector, taskId, actual, expected);
    }
}
