// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {MockStablecoin} from "../../src/MockStablecoin.sol";
import {GPURegistry} from "../../src/GPURegistry.sol";
import {PaymentEscrow} from "../../src/PaymentEscrow.sol";
import {TaskRegistry} from "../../src/TaskRegistry.sol";
import {Arbitration} from "../../src/Arbitration.sol";
import {VerifierRegistry} from "../../src/VerifierRegistry.sol";
import {LineChallenges} from "../../src/LineChallenges.sol";
import {Audits} from "../../src/Audits.sol";
import {BlockRandomness} from "../../src/BlockRandomness.sol";
import {Headers} from "../utils/Headers.sol";
import {ILineChallenges as IL} from "../../src/interfaces/ILineChallenges.sol";
import {IGPURegistry as IG} from "../../src/interfaces/IGPURegistry.sol";
import {ITaskRegistry as IT} from "../../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../../src/interfaces/IArbitration.sol";
import {IAudits as IAu} from "../../src/interfaces/IAudits.sol";
import {IPaymentEscrow as IE} from "../../src/interfaces/IPaymentEscrow.sol";
import {ResultLeaf} from "../../src/libraries/ResultLeaf.sol";
import {ResultTree} from "../utils/ResultTree.sol";
import {Consent} from "../utils/Consent.sol";

/// @notice Random, mostly valid market actions. Records from the emitted events what the invariants need:
/// deposits and settlements per task, slashes against the stake locked at that moment, every status seen.
/// Settling actions are also tried on tasks and disputes in any state, so a second settlement would be caught.
/// Every action happens in a new block (verifiers vote only on disputes opened after their registration block,
/// and audit seeds come from later blocks).
contract Handler is Consent {
    struct Deployment {
        MockStablecoin token;
        GPURegistry registry;
        PaymentEscrow escrow;
        TaskRegistry tasks;
        Arbitration arbitration;
        VerifierRegistry verifierRegistry;
        LineChallenges challenges;
        Audits audits;
        BlockRandomness randomness;
        address admin;
        address coordinator;
        address feeRecipient;
    }

    bytes32 internal constant MODEL = "llama-3.1-8b-instruct";
    /// @dev A second model: a third of the tasks are of it, and verifiers judge one model or both.
    bytes32 internal constant OTHER_MODEL = "mistral-7b-instruct";
    /// @dev Longer than any task (5 days to its deadline), its challenge window, an audit's longest run (which
    /// extends that window) and the owner's dispute's longest run (3 rounds of 4 phases each) together.
    uint256 public constant ENDS_WITHIN = 60 days;

    MockStablecoin internal token;
    GPURegistry internal registry;
    PaymentEscrow internal escrow;
    TaskRegistry internal tasks;
    Arbitration internal arbitration;
    VerifierRegistry internal verifierRegistry;
    LineChallenges internal challenges;
    Audits internal audits;
    BlockRandomness internal randomness;
    address internal admin;
    address internal coordinator;
    address internal feeRecipient;

    address[] public miners;
    uint256[] internal signerKeys;
    address[] internal owners;
    address[] public verifiers; // chaos: random stakes, random votes
    address[] public sybils; // minimum stake each; always vote against the truth
    address[] public honest; // most of the stake (two per model); always online, always vote the truth
    /// @dev Honest one-seat verifiers beside the whales above, each judging one model only (half of them each).
    address[] public oneSeat;
    address internal sponsor;
    /// @dev A colluding owner and the coordinator, both staked as verifiers: they vote "at fault" on every jury
    /// they sit on and must never sit on a dispute of a task they are party to.
    address[] public colluders;

    mapping(uint256 taskId => uint256) internal leafSeedOf;
    mapping(uint256 taskId => uint256) internal leafCountOf;
    /// @dev Tasks whose coordinator and miners, colluding, committed more output tokens than the leaves hold.
    mapping(uint256 taskId => bool) public usageInflated;
    /// @notice Tasks an assigned miner vouched for on-chain (its coordinator withheld the commit).
    mapping(uint256 taskId => bool) public ghostVouched;
    /// @notice Tasks a coordinator and one colluding miner committed with a billed line no signer answers for
    /// (its position + 1; the colluder alone signs), and whether the owner challenged that line.
    mapping(uint256 taskId => uint256) public unaccountableLine;
    mapping(uint256 taskId => bool) public ghostUnaccountableChallenged;
    /// @dev Line challenges that were open at some point: answerers look at these.
    uint256[] internal _challenged;
    /// @dev A challenge of an honest commitment went unanswered although its miners are always online.
    bool public ghostHonestChallengeUnanswered;
    /// @dev An unanswered challenge took stake from a miner whose signature the commitment did not carry.
    bool public ghostChallengeSlashedNonSigner;
    uint256 public challengesAnswered;
    uint256 public challengesUnanswered;

    // Ghost state, read from events.
    mapping(uint256 taskId => uint256) public ghostDeposited;
    mapping(uint256 taskId => uint256) public ghostDepositCount;
    mapping(uint256 taskId => uint256) public ghostSettleCount;
    mapping(uint256 taskId => uint256) public ghostPaidOut; // to miners and fee recipient
    mapping(uint256 taskId => uint256) public ghostRefunded; // to the owner
    mapping(uint256 taskId => uint256) public ghostEndEvents; // TaskFinalized/Refunded/Cancelled/Expired
    mapping(uint256 disputeId => uint256) public ghostBondSettleCount; // settled or returned to the pool
    mapping(uint256 taskId => uint8) internal lastStatus;
    mapping(uint256 disputeId => uint8) internal lastDisputeStatus;
    bool public ghostSlashAboveLock;
    /// @dev `reweigh` raised a pool's weight, or left a weight its stake does not back.
    bool public ghostReweighWrong;
    bool public ghostSlashNotTaskLock;
    bool public ghostUnlockAboveLock;
    bool public ghostStatusRegressed;
    bool public ghostDisputeStatusRegressed;
    /// @dev A miner lost stake over a line that was correct.
    bool public ghostHonestMinerSlashed;
    /// @dev A dispute ended against the truth although honest jurors revealed most of its last round's seats.
    bool public ghostHonestMajorityOverruled;
    bool internal _resolvingCorrectLine;
    /// @dev Per miner: stake put in (register, addStake), taken out (withdrawStake) and slashed, in total and over
    /// lines that were correct.
    mapping(address miner => uint256) public ghostStakeIn;
    mapping(address miner => uint256) public ghostStakeOut;
    mapping(address miner => uint256) public ghostSlashedOf;
    mapping(address miner => uint256) public ghostSlashedOverCorrectLine;
    /// @dev A party to a task (owner, coordinator, assigned miner or signer, opener, pipeline) was seated on a jury
    /// of one of its disputes.
    bool public ghostPartySeated;
    /// @dev An audit sealed after its seed block's hash was gone came out unselected (the task escaped).
    bool public ghostWithheldSealSpared;
    /// @dev An audit's dispute was settled, or a dispute joined, with money or pipeline moving as it must not:
    /// an opener's deposit penalized when the miners were not found correct, or a miner not accountable for the
    /// leaf added to its pipeline.
    bool public ghostAuditSettledWrongly;
    bool public ghostUnaccountableJoined;
    /// @dev Some miner's stake was locked for a task without its consent to that task and lock.
    bool public ghostLockedWithoutConsent;
    /// @dev A juror was seated on a dispute of a model it never registered to judge.
    bool public ghostSeatedOutsideItsModels;
    mapping(address verifier => mapping(bytes32 model => bool)) internal _everJudged;
    /// @dev Set if a usage that was the leaves' true sum was ever refuted.
    bool public ghostHonestUsageRefuted;
    /// @dev A refutation took stake from a miner whose signature the refuted commitment did not carry.
    bool public ghostNonSignerSlashed;
    /// @dev A refutation paid someone more than its escrow back: the owner beyond the task's escrow, the refuter
    /// anything, or the audit pool other than exactly the stake the signers lost.
    bool public ghostRefutationPaidAParty;
    /// @dev A conviction paid a party part of the slash: the audit pool got less than the slash less the jurors'
    /// reward (a thief of a signer key could otherwise dispute a line it signed and cash the lock).
    bool public ghostConvictionPaidAParty;
    /// @dev A signer its miner revoked on a task vouched for, or signed a commitment of, that task.
    bool public ghostRevokedSignerSpoke;
    uint256 public signerChanges;
    uint256 public signerRevocations;
    /// @dev Every signer key the miners have had, by address (a miner pointed at a stranger has none here).
    mapping(address signer => uint256 key) internal _keyOfSigner;
    // Adversarial actions that went through.
    uint256 public sybilAudits;
    uint256 public sybilAppeals;
    uint256 public griefAppeals;
    uint256 public collusiveDisputes;
    uint256 public collusiveAppeals;
    uint256 public withheldSeals;
    uint256 public partialAudits;
    uint256 public joins;
    uint256 public auditsSettled;
    uint256 public inflatedCommits;
    uint256 public refutations;
    // Successful actions.
    uint256 public created;
    uint256 public opened; // disputes, audits included
    uint256 public audited;
    uint256[5] public resolvedAs; // by dispute outcome

    mapping(address miner => uint256) internal _lockedBefore;
    /// @dev Stake slashed in the logs read since `_snapshotLocks`.
    uint256 internal _slashedSinceSnapshot;
    uint256 internal _resolvingStakeLock;

    constructor(Deployment memory d, address[] memory miners_, uint256[] memory keys) {
        (token, registry, escrow, tasks) = (d.token, d.registry, d.escrow, d.tasks);
        (arbitration, verifierRegistry, challenges, audits) =
        (d.arbitration, d.verifierRegistry, d.challenges, d.audits);
        randomness = d.randomness;
        (admin, coordinator, feeRecipient) = (d.admin, d.coordinator, d.feeRecipient);
        miners = miners_;
        signerKeys = keys;
        for (uint256 i = 0; i < keys.length; ++i) {
            _keyOfSigner[vm.addr(keys[i])] = keys[i];
        }
        for (uint256 i = 0; i < 3; ++i) {
            owners.push(makeAddr(string.concat("owner", vm.toString(i))));
        }
        for (uint256 i = 0; i < 4; ++i) {
            verifiers.push(makeAddr(string.concat("voter", vm.toString(i))));
        }
        for (uint256 i = 0; i < 6; ++i) {
            sybils.push(makeAddr(string.concat("sybil", vm.toString(i))));
        }
        for (uint256 i = 0; i < 4; ++i) {
            honest.push(makeAddr(string.concat("honest", vm.toString(i))));
        }
        for (uint256 i = 0; i < 8; ++i) {
            oneSeat.push(makeAddr(string.concat("one seat", vm.toString(i))));
        }
        sponsor = makeAddr("audit sponsor");
        colluders.push(owners[0]);
        colluders.push(coordinator);
    }

    // ---- bookkeeping

    modifier track() {
        vm.roll(block.number + 1);
        _snapshotLocks();
        vm.recordLogs();
        _;
        _readLogs(vm.getRecordedLogs());
        _resolvingCorrectLine = false;
        _checkStatuses();
    }

    function _snapshotLocks() internal {
        _slashedSinceSnapshot = 0;
        for (uint256 i = 0; i < miners.length; ++i) {
            _lockedBefore[miners[i]] = registry.stakeOf(miners[i]).locked;
        }
    }

    function _readLogs(Vm.Log[] memory logs) internal {
        for (uint256 i = 0; i < logs.length; ++i) {
            bytes32 sig = logs[i].topics[0];
            uint256 topic1 = logs[i].topics.length > 1 ? uint256(logs[i].topics[1]) : 0;
            if (logs[i].emitter == address(escrow)) {
                if (sig == IE.EscrowDeposited.selector) {
                    ghostDeposited[topic1] += abi.decode(logs[i].data, (uint256));
                    ++ghostDepositCount[topic1];
                } else if (sig == IE.EscrowSettled.selector) {
                    (uint256 paidOut, uint256 refund) = abi.decode(logs[i].data, (uint256, uint256));
                    ++ghostSettleCount[topic1];
                    ghostPaidOut[topic1] += paidOut;
                    ghostRefunded[topic1] += refund;
                } else if (sig == IE.BondReleased.selector && abi.decode(logs[i].data, (uint256)) != 0) {
                    ++ghostBondSettleCount[topic1];
                }
            } else if (logs[i].emitter == address(registry)) {
                address miner = address(SafeCast.toUint160(topic1));
                if (sig == IG.StakeSlashed.selector) {
                    uint256 amount = abi.decode(logs[i].data, (uint256));
                    if (amount > _lockedBefore[miner]) ghostSlashAboveLock = true;
                    else _lockedBefore[miner] -= amount;
                    if (amount != _resolvingStakeLock) ghostSlashNotTaskLock = true;
                    ghostSlashedOf[miner] += amount;
                    _slashedSinceSnapshot += amount;
                    if (_resolvingCorrectLine) {
                        ghostHonestMinerSlashed = true;
                        ghostSlashedOverCorrectLine[miner] += amount;
                    }
                } else if (sig == IG.StakeWithdrawn.selector) {
                    ghostStakeOut[miner] += abi.decode(logs[i].data, (uint256));
                } else if (sig == IG.StakeLocked.selector) {
                    _lockedBefore[miner] += abi.decode(logs[i].data, (uint256));
                } else if (sig == IG.StakeUnlocked.selector) {
                    uint256 amount = abi.decode(logs[i].data, (uint256));
                    if (amount > _lockedBefore[miner]) ghostUnlockAboveLock = true;
                    else _lockedBefore[miner] -= amount;
                }
            } else if (logs[i].emitter == address(tasks)) {
                if (
                    sig == IT.TaskFinalized.selector || sig == IT.TaskRefunded.selector
                        || sig == IT.TaskCancelled.selector || sig == IT.TaskExpired.selector
                        || sig == IT.UsageRefuted.selector
                ) ++ghostEndEvents[topic1];
            }
        }
    }

    /// @dev Statuses only increase, and an ended task or dispute never changes again.
    function _checkStatuses() internal {
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            uint8 s = uint8(tasks.getTask(id).status);
            uint8 last = lastStatus[id];
            // The one step back: an audit that found nothing returns its task to the challenge window.
            bool auditEnded =
                last == uint8(IT.TaskStatus.Disputed) && s == uint8(IT.TaskStatus.ResultsCommitted);
            if ((s < last && !auditEnded) || (last >= uint8(IT.TaskStatus.Finalized) && s != last)) {
                ghostStatusRegressed = true;
            }
            lastStatus[id] = s;
        }
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            uint8 s = uint8(arbitration.getDispute(id).status);
            uint8 last = lastDisputeStatus[id];
            if (s < last || (last > 1 && s != last)) ghostDisputeStatusRegressed = true;
            lastDisputeStatus[id] = s;
        }
    }

    // ---- honest and sybil jurors

    /// @dev Moves the clock to `target`, stopping at every phase boundary of an open dispute on the way so that
    /// the honest verifiers (always online) commit and reveal in every phase they sit in, and the sybils too.
    function _warpTo(uint256 target) internal {
        for (uint256 guard = 0; guard < 64; ++guard) {
            _jurorsAct();
            _answerersAct();
            uint256 next = target;
            for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
                if (arbitration.getDispute(id).status != IA.DisputeStatus.Open) continue;
                (, IA.Round memory round) = _currentRound(id);
                uint64[2] memory edges = [round.commitDeadline, round.revealDeadline];
                for (uint256 k = 0; k < 2; ++k) {
                    if (edges[k] > block.timestamp && edges[k] < next) next = edges[k];
                }
            }
            if (next <= block.timestamp) return;
            vm.warp(next);
            if (next == target) {
                _jurorsAct();
                return;
            }
        }
        vm.warp(target);
    }

    /// @dev Honest jurors commit and reveal the truth, sybil jurors the opposite, in every open dispute's current
    /// round whose phase allows it.
    function _jurorsAct() internal {
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            IA.Dispute memory d = arbitration.getDispute(id);
            if (d.status != IA.DisputeStatus.Open) continue;
            (uint8 r, IA.Round memory round) = _currentRound(id);
            if (round.commitDeadline == 0) continue;
            IA.Vote truth =
                corrupted(d.taskId, d.requestIndex) ? IA.Vote.MinersAtFault : IA.Vote.MinersCorrect;
            IA.Vote lie = truth == IA.Vote.MinersAtFault ? IA.Vote.MinersCorrect : IA.Vote.MinersAtFault;
            _actAll(id, r, round, honest, truth);
            _actAll(id, r, round, oneSeat, truth);
            _actAll(id, r, round, sybils, lie);
            _actAll(id, r, round, colluders, IA.Vote.MinersAtFault);
        }
    }

    function _actAll(uint256 id, uint8 r, IA.Round memory round, address[] storage group, IA.Vote choice)
        internal
    {
        for (uint256 i = 0; i < group.length; ++i) {
            IA.Juror memory seat = arbitration.jurorOf(id, r, group[i]);
            if (seat.seats == 0) continue;
            if (block.timestamp < round.commitDeadline && seat.commitment == 0) {
                bytes32 sealed_ = arbitration.voteCommitment(id, r, group[i], choice, _salt(group[i]));
                vm.prank(group[i]);
                arbitration.commitVote(id, sealed_);
            } else if (
                block.timestamp >= round.commitDeadline && block.timestamp < round.revealDeadline
                    && seat.commitment != 0 && seat.vote == IA.Vote.None
            ) {
                vm.prank(group[i]);
                arbitration.revealVote(id, choice, _salt(group[i]));
            }
        }
    }

    /// @dev After a resolution: if honest jurors revealed most seats of the last round that was drawn, the outcome
    /// is the truth.
    function _checkHonestMajority(uint256 id, IA.DisputeStatus outcome) internal {
        IA.Dispute memory d = arbitration.getDispute(id);
        uint8 r = d.round;
        if (arbitration.roundOf(id, r).commitDeadline == 0) {
            if (r == 0) return;
            --r; // an undrawn appeal round: the previous one decided
        }
        IA.Round memory round = arbitration.roundOf(id, r);
        uint256 honestSeats;
        for (uint256 i = 0; i < honest.length; ++i) {
            IA.Juror memory seat = arbitration.jurorOf(id, r, honest[i]);
            if (seat.vote != IA.Vote.None) honestSeats += seat.seats;
        }
        if (2 * honestSeats <= uint256(round.votesCorrect) + round.votesAtFault) return;
        bool wrongLine = corrupted(d.taskId, d.requestIndex);
        IA.DisputeStatus truth = wrongLine ? IA.DisputeStatus.MinersAtFault : IA.DisputeStatus.MinersCorrect;
        if (outcome != truth) ghostHonestMajorityOverruled = true;
    }

    function _mintTo(address to, address spender, uint256 amount) internal {
        vm.prank(admin);
        token.mint(to, amount);
        vm.prank(to);
        token.approve(spender, amount);
    }

    /// @dev Task `id`'s assigned miners and each one's stake now.
    function _stakesOf(uint256 id)
        internal
        view
        returns (address[] memory assigned, uint256[] memory stakes)
    {
        assigned = tasks.minersOf(id);
        stakes = new uint256[](assigned.length);
        for (uint256 i = 0; i < assigned.length; ++i) {
            stakes[i] = _stakeOf(assigned[i]);
        }
    }

    /// @dev Whether a miner of `assigned` outside the `signed` mask has another stake than `before`.
    function _nonSignerLostStake(address[] memory assigned, uint256[] memory before, uint256 signed)
        internal
        view
        returns (bool)
    {
        for (uint256 i = 0; i < assigned.length; ++i) {
            if (signed & (1 << i) == 0 && _stakeOf(assigned[i]) != before[i]) return true;
        }
        return false;
    }

    function _pickTask(uint256 seed) internal view returns (uint256) {
        uint256 count = tasks.taskCount();
        return count == 0 ? 0 : seed % count + 1;
    }

    /// @dev A task in `status` whose deadline (once committed: challenge window) has not passed; 0 if none.
    function _pickLiveTask(uint256 seed, IT.TaskStatus status) internal view returns (uint256) {
        uint256 count = tasks.taskCount();
        for (uint256 i = 0; i < count; ++i) {
            uint256 id = (seed % count + i) % count + 1;
            IT.Task memory t = tasks.getTask(id);
            if (t.status != status) continue;
            uint256 end =
                status == IT.TaskStatus.ResultsCommitted ? tasks.challengeEndsAt(id) - 1 : t.deadline;
            if (block.timestamp <= end) return id;
        }
        return 0;
    }

    /// @dev A task in `status`, or one time in four any task at all.
    function _pickTaskMostlyIn(uint256 seed, IT.TaskStatus status) internal view returns (uint256) {
        if (seed % 4 == 0) return _pickTask(seed >> 2);
        uint256 count = tasks.taskCount();
        for (uint256 i = 0; i < count; ++i) {
            uint256 id = ((seed >> 2) % count + i) % count + 1;
            if (tasks.getTask(id).status == status) return id;
        }
        return 0;
    }

    /// @dev An open dispute, or one time in four any dispute at all.
    function _pickDispute(uint256 seed) internal view returns (uint256) {
        uint256 count = arbitration.disputeCount();
        if (count == 0 || seed % 4 == 0) return count == 0 ? 0 : (seed >> 2) % count + 1;
        for (uint256 i = 0; i < count; ++i) {
            uint256 id = ((seed >> 2) % count + i) % count + 1;
            if (arbitration.getDispute(id).status == IA.DisputeStatus.Open) return id;
        }
        return 0;
    }

    /// @dev The key of the miner's current signer (its first key before it registers); 0 when the miner points
    /// its signer at someone else, whose consent the handler cannot sign.
    function _stakeOf(address miner) internal view returns (uint256) {
        IG.Stake memory s = registry.stakeOf(miner);
        return uint256(s.free) + s.locked + s.unbonding;
    }

    function _keyOf(address miner) internal view override returns (uint256) {
        if (registry.isRegistered(miner)) return _keyOfSigner[registry.signerOf(miner)];
        for (uint256 i = 0; i < miners.length; ++i) {
            if (miners[i] == miner) return signerKeys[i];
        }
        revert("unknown miner");
    }

    /// @notice A miner changes its signer at any moment: to a fresh key of its own, or (the attack) to a verifier
    /// it wants to make a party to its disputes and audits: an honest one, a sybil, or the colluding owner.
    function setSigner(uint256 minerSeed, uint256 how) external track {
        address m = miners[minerSeed % miners.length];
        if (!registry.isRegistered(m)) return;
        address target;
        if (how % 2 == 0) {
            uint256 key = uint256(keccak256(abi.encode("rotated signer", m, how))) % (2 ** 255) + 1;
            target = vm.addr(key);
            _keyOfSigner[target] = key;
        } else if (how % 4 == 1) {
            target = honest[(how >> 2) % honest.length];
        } else {
            target = sybils[(how >> 2) % sybils.length];
        }
        vm.prank(m);
        registry.setSigner(target);
        ++signerChanges;
    }

    // ---- miners

    function register(uint256 minerSeed, uint256 stake) external track {
        address m;
        for (uint256 i = 0; i < miners.length && m == address(0); ++i) {
            address candidate = miners[(minerSeed % miners.length + i) % miners.length];
            if (!registry.isRegistered(candidate)) m = candidate;
        }
        if (m == address(0)) return;
        stake = _bound(stake, registry.minStake(), 1_000e6);
        _mintTo(m, address(registry), stake);
        IG.MinerProfile memory p = IG.MinerProfile(
            vm.addr(_keyOf(m)), "H100-80GB", 80, 1, "eu-west-1", 1, "https://m.example", _bothModels()
        );
        vm.prank(m);
        registry.register(p, stake);
        ghostStakeIn[m] += stake;
    }

    function addStake(uint256 minerSeed, uint256 amount) external track {
        address m = miners[minerSeed % miners.length];
        if (!registry.isRegistered(m)) return;
        amount = _bound(amount, 1, 500e6);
        _mintTo(m, address(registry), amount);
        vm.prank(m);
        registry.addStake(amount);
        ghostStakeIn[m] += amount;
    }

    function requestUnstake(uint256 minerSeed, uint256 amount) external track {
        address m = miners[minerSeed % miners.length];
        uint256 free = registry.stakeOf(m).free;
        if (free == 0) return;
        vm.prank(m);
        registry.requestUnstake(_bound(amount, 1, free / 4 + 1));
    }

    /// @dev One time in four waits for the release time first.
    function withdrawStake(uint256 minerSeed, uint8 wait) external track {
        address m = miners[minerSeed % miners.length];
        IG.Stake memory s = registry.stakeOf(m);
        if (s.unbonding == 0) return;
        if (wait % 4 == 0 && block.timestamp < s.unbondingReleaseAt) _warpTo(s.unbondingReleaseAt);
        vm.prank(m);
        try registry.withdrawStake() {} catch {}
    }

    // ---- tasks

    function createTask(
        uint256 ownerSeed,
        uint256 maxPrice,
        uint256 requestCount,
        uint256 duration,
        uint128 inputPrice,
        uint128 outputPrice
    ) external track {
        address owner = owners[ownerSeed % owners.length];
        maxPrice = _bound(maxPrice, 1, 1_000e6);
        _mintTo(owner, address(escrow), maxPrice);
        IT.CreateTaskParams memory p = IT.CreateTaskParams({
            modelId: duration % 3 == 2 ? OTHER_MODEL : MODEL,
            inputRoot: keccak256(abi.encode(owner, block.timestamp, maxPrice)),
            requestCount: uint32(_bound(requestCount, 1, 6)), // one leaf per request, so audits can open
            paramsHash: 0,
            maxPrice: SafeCast.toUint128(maxPrice),
            deadline: uint64(block.timestamp + _bound(duration, 1 hours, 5 days)),
            inputPricePerMillion: uint128(_bound(inputPrice, 0, 100e6)),
            outputPricePerMillion: uint128(_bound(outputPrice, 0, 100e6))
        });
        vm.prank(owner);
        tasks.createTask(p);
        ++created;
    }

    function cancelTask(uint256 taskSeed) external track {
        uint256 id = _pickTaskMostlyIn(taskSeed, IT.TaskStatus.Open);
        if (id == 0) return;
        vm.prank(tasks.getTask(id).owner);
        try tasks.cancelTask(id) {} catch {}
    }

    /// @dev The coordinator gives up an open or assigned task (a cancel through its API before any line was served).
    function releaseTask(uint256 taskSeed) external track {
        uint256 id =
            _pickTaskMostlyIn(taskSeed, taskSeed % 2 == 0 ? IT.TaskStatus.Open : IT.TaskStatus.Assigned);
        if (id == 0) return;
        if (tasks.getTask(id).status == IT.TaskStatus.Assigned) {
            vm.prank(coordinator);
            tasks.requestRelease(id); // goes through only after its notice (the warps) and if no miner vouched
        }
        vm.prank(coordinator);
        try tasks.releaseTask(id) {} catch {}
    }

    /// @notice A miner's account revokes the signer it accepted an Assigned task with (its key leaked); the thief
    /// holding that key then tries to vouch for, and to commit signed, inflated totals: both must be refused as
    /// revoked.
    function revokeSigner(uint256 taskSeed, uint256 minerSeed) external track {
        uint256 id = _pickLiveTask(taskSeed, IT.TaskStatus.Assigned);
        if (id == 0) return;
        address[] memory assigned = tasks.minersOf(id);
        uint256 i = minerSeed % assigned.length;
        vm.prank(assigned[i]);
        tasks.revokeSigner(id);
        ++signerRevocations;
        address thief = tasks.signersOf(id)[i];
        if (thief == assigned[i] || block.timestamp > tasks.getTask(id).deadline) return;
        IT.Commitment memory c;
        c.resultsRoot = keccak256(abi.encode("made up", id, minerSeed));
        c.outputTokens = uint64(1 + minerSeed % 1e9);
        c.payment = tasks.priceOf(id, 0, c.outputTokens);
        c.minerAmounts = _randomShares(c.payment, assigned.length, minerSeed);
        c.servedRoots = new bytes32[](assigned.length);
        for (uint256 k = 0; k < assigned.length; ++k) {
            c.servedRoots[k] = keccak256(abi.encode(c.resultsRoot, k));
        }
        vm.prank(thief);
        try tasks.vouchResults(id, c) {
            ghostRevokedSignerSpoke = true;
        } catch {}
        bytes[] memory sigs = _signFirst(id, c, assigned, assigned.length);
        vm.prank(coordinator);
        try tasks.commitResults(id, c, sigs) {
            ghostRevokedSignerSpoke = true;
        } catch (bytes memory reason) {
            // refused, but not as revoked: the check may not be what stopped it (a well-formed commitment whose
            // only fault is the revoked key; a handler that cannot sign for a slot reverts before this call)
            if (bytes4(reason) != IT.SignerRevoked.selector) ghostRevokedSignerSpoke = true;
        }
    }

    /// @notice A coordinator that withholds the commit: some or all assigned miners vouch on-chain for the
    /// commitment they signed, by their own address or their signer's; once all have, one of them commits it,
    /// else the coordinator tries to release the task after its notice. A vouched task is never released.
    function vouchAndCommit(uint256 taskSeed, uint256 seed) external track {
        uint256 id = _pickLiveTask(taskSeed, IT.TaskStatus.Assigned);
        if (id == 0) return;
        // neither inflated nor leaving a miner out: what honest miners sign
        (IT.Commitment memory c, address[] memory assigned,) = _commitmentFor(id, 0, seed - seed % 24 + 1);
        uint256 n = assigned.length;
        uint256 vouching = seed % 2 == 0 ? n : 1 + (seed >> 8) % n;
        for (uint256 i = 0; i < vouching; ++i) {
            vm.prank(i % 2 == 0 ? assigned[i] : tasks.signersOf(id)[i]);
            tasks.vouchResults(id, c);
        }
        ghostVouched[id] = true;
        if (vouching < n) {
            // the coordinator tries to release what some miners vouched for, after its notice
            vm.prank(coordinator);
            tasks.requestRelease(id);
            _warpTo(tasks.releaseAtOf(id));
            vm.prank(coordinator);
            try tasks.releaseTask(id) {} catch {}
            return;
        }
        vm.prank(assigned[(seed >> 16) % n]);
        tasks.commitResults(id, c, new bytes[](n));
    }

    function assignTask(uint256 taskSeed, uint256 minerMask, uint256 stakeLock) external track {
        uint256 id = _pickLiveTask(taskSeed, IT.TaskStatus.Open);
        if (id == 0) return;
        stakeLock = _bound(stakeLock, tasks.minStakeLock(), 60e6);
        address[] memory chosen = new address[](miners.length);
        uint256 n;
        for (uint256 i = 0; i < miners.length && n < 3; ++i) {
            if ((minerMask >> i) & 1 == 0) continue;
            if (!registry.isRegistered(miners[i]) || registry.stakeOf(miners[i]).free < stakeLock) continue;
            if (_keyOf(miners[i]) == 0) continue; // its signer is a stranger's: it cannot consent
            chosen[n++] = miners[i];
        }
        if (n == 0) return;
        assembly ("memory-safe") {
            mstore(chosen, n)
        }
        uint128 lock = SafeCast.toUint128(stakeLock);
        // the acceptances read the miners' signers: made before the prank, which the next call takes
        IT.Acceptance[] memory acceptances = _acceptances(tasks, id, chosen, lock);
        vm.prank(coordinator);
        tasks.assignTask(id, chosen, lock, acceptances);
    }

    /// @dev Whether line `j` of a committed task is wrong: one line in four, fixed by the task's leaf seed.
    function corrupted(uint256 taskId, uint256 j) public view returns (bool) {
        return uint256(keccak256(abi.encode(leafSeedOf[taskId], j, "corrupt"))) % 4 == 0;
    }

    /// @dev Leaves of a committed task: pipelines are random picks (repeats allowed) of its assigned miners, never of
    /// one the commitment leaves out (gone for good: its lines were served again by others); a line served by no
    /// one bills nothing. A coordinator and miner that colluded bill one more line that no signer answers for.
    function _leaves(uint256 taskId) internal view returns (ResultLeaf.Leaf[] memory ls) {
        address[] memory assigned = tasks.minersOf(taskId);
        uint256 seed = leafSeedOf[taskId];
        uint256 servers = assigned.length > 1 && seed % 3 == 0 ? assigned.length - 1 : assigned.length;
        ls = new ResultLeaf.Leaf[](leafCountOf[taskId]);
        for (uint256 j = 0; j < ls.length; ++j) {
            uint256 r = uint256(keccak256(abi.encode(seed, j)));
            address[] memory pipeline = new address[](r % (servers + 1));
            for (uint256 k = 0; k < pipeline.length; ++k) {
                pipeline[k] = assigned[(r >> (8 * (k + 1))) % servers];
            }
            bytes32 h = bytes32(r);
            uint32 inputTokens = pipeline.length == 0 ? 0 : SafeCast.toUint32(r >> 224);
            uint32 outputTokens = pipeline.length == 0 ? 0 : 7;
            ls[j] = ResultLeaf.Leaf(
                taskId, SafeCast.toUint32(j), h, ~h, h ^ bytes32(j), inputTokens, outputTokens, pipeline
            );
        }
        uint256 unaccountable = unaccountableLine[taskId];
        if (unaccountable != 0) {
            ResultLeaf.Leaf memory line = ls[unaccountable - 1];
            line.outputTokens = 2_000_000;
            line.pipeline = new address[](1);
            line.pipeline[0] = assigned[assigned.length - 1]; // never the colluder, who alone signs
        }
    }

    /// @dev One leaf per request, as the coordinator commits them, with the usage the leaves add up to at its
    /// price; one commit in eight comes from a colluding coordinator and miners who overstate the output tokens
    /// by `inflation` (1 to 10 million), all miners signing. One commit in three leaves its last miner out (a miner
    /// gone for good): paid nothing, vouching for nothing, with an empty signature.
    function commitResults(uint256 taskSeed, uint256 inflation, uint256 seed) external track {
        uint256 id = _pickLiveTask(taskSeed, IT.TaskStatus.Assigned);
        if (id == 0) return;
        (IT.Commitment memory c, address[] memory assigned, uint256 paid) =
            _commitmentFor(id, inflation, seed);
        bytes[] memory sigs = _signFirst(id, c, assigned, paid);
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);
    }

    /// @dev Task `id`'s commitment of the leaves `seed` makes: usage inflated when `seed % 8 == 0`, the last miner
    /// left out (paid nothing, vouching for nothing) when `seed % 3 == 0`; with the miners and how many are paid.
    function _commitmentFor(uint256 id, uint256 inflation, uint256 seed)
        internal
        returns (IT.Commitment memory c, address[] memory assigned, uint256 paid)
    {
        IT.Task memory t = tasks.getTask(id);
        leafSeedOf[id] = seed;
        leafCountOf[id] = t.requestCount;
        assigned = tasks.minersOf(id);
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        (uint64 inputTokens, uint64 outputTokens) = ResultTree.usage(ls);
        if (seed % 8 == 0) {
            outputTokens += uint64(_bound(inflation, 1, 10e6));
            usageInflated[id] = true;
            ++inflatedCommits;
        }
        uint128 payment = tasks.priceOf(id, inputTokens, outputTokens);
        bool leaveOut = assigned.length > 1 && seed % 3 == 0;
        paid = leaveOut ? assigned.length - 1 : assigned.length;
        c = IT.Commitment(
            ResultTree.root(ls),
            inputTokens,
            outputTokens,
            payment,
            _randomShares(payment, paid, seed),
            ResultTree.servedRoots(ls, assigned)
        );
        if (leaveOut) {
            c.minerAmounts = _withZero(c.minerAmounts);
            c.servedRoots[paid] = bytes32(0);
        }
    }

    /// @notice A coordinator and its first assigned miner collude: they bill one more line of 2,000,000 output
    /// tokens that names, if anyone, only another miner, whose signature they leave out; the colluder alone signs
    /// (its served root holds only the lines that name it). The owner may challenge that line: nobody can answer.
    function commitUnaccountable(uint256 taskSeed, uint256 seed) external track {
        uint256 id = _pickLiveTask(taskSeed, IT.TaskStatus.Assigned);
        if (id == 0) return;
        address[] memory assigned = tasks.minersOf(id);
        if (assigned.length < 2) return;
        IT.Task memory t = tasks.getTask(id);
        leafSeedOf[id] = seed - seed % 3 + 1; // no miner left out of the leaves: the colluders leave one out below
        leafCountOf[id] = t.requestCount;
        unaccountableLine[id] = 1 + seed % t.requestCount;
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        (uint64 inputTokens, uint64 outputTokens) = ResultTree.usage(ls);
        uint128 payment = tasks.priceOf(id, inputTokens, outputTokens);
        IT.Commitment memory c = IT.Commitment(
            ResultTree.root(ls),
            inputTokens,
            outputTokens,
            payment,
            new uint256[](assigned.length),
            new bytes32[](assigned.length)
        );
        c.minerAmounts[0] = payment - payment * tasks.coordinatorFeeBps() / 10_000;
        c.servedRoots[0] = ResultTree.servedRoots(ls, assigned)[0];
        bytes[] memory sigs = _signFirst(id, c, assigned, 1);
        vm.prank(coordinator);
        tasks.commitResults(id, c, sigs);
        ++inflatedCommits;
    }

    // ---- line challenges

    /// @notice An owner challenges a line of its committed task: one time in two the colluders' unaccountable
    /// line where there is one, else any position (also of tasks in any state, which must revert).
    function challengeLine(uint256 taskSeed, uint256 indexSeed) external track {
        uint256 id = taskSeed % 4 == 0
            ? _pickTask(taskSeed >> 2)
            : _pickLiveTask(taskSeed >> 2, IT.TaskStatus.ResultsCommitted);
        if (id == 0) return;
        IT.Task memory t = tasks.getTask(id);
        uint256 unaccountable = unaccountableLine[id];
        uint256 index =
            unaccountable != 0 && indexSeed % 2 == 0 ? unaccountable - 1 : indexSeed % (t.requestCount + 1);
        vm.prank(t.owner);
        try challenges.challengeLine(id, index) {
            _challenged.push(id << 32 | index);
            if (unaccountable == index + 1) ghostUnaccountableChallenged[id] = true;
        } catch {}
    }

    /// @dev The miners and coordinator, always online, answer every open challenge they can (with the leaves they
    /// committed) before time moves on.
    function _answerersAct() internal {
        for (uint256 i = 0; i < _challenged.length; ++i) {
            uint256 id = _challenged[i] >> 32;
            uint256 index = _challenged[i] & type(uint32).max;
            IL.Challenge memory ch = challenges.challengeOf(id, index);
            if (ch.status != IL.ChallengeStatus.Open || block.timestamp > ch.answerBy) continue;
            ResultLeaf.Leaf[] memory ls = _leaves(id);
            try challenges.answerLine(
                id, ls[index], ResultTree.proof(ls, index), ResultTree.servedProofs(ls, index)
            ) {
                ++challengesAnswered;
            } catch {}
        }
    }

    /// @notice Anyone settles an open challenge once its answer period is over (waiting for it one time in two;
    /// the answerers act first). Only the commitment's signers lose stake, and only over an unanswerable line.
    function settleUnanswered(uint256 pick, uint8 wait) external track {
        if (_challenged.length == 0) return;
        uint256 entry = _challenged[pick % _challenged.length];
        (uint256 id, uint256 index) = (entry >> 32, entry & type(uint32).max);
        IL.Challenge memory ch = challenges.challengeOf(id, index);
        if (wait % 2 == 0 && ch.answerBy >= block.timestamp) _warpTo(uint256(ch.answerBy) + 1);
        _settleChallenge(id, index);
    }

    function _settleChallenge(uint256 id, uint256 index) internal {
        _resolvingStakeLock = tasks.getTask(id).stakeLock;
        (address[] memory assigned, uint256[] memory before) = _stakesOf(id);
        uint256 signed = tasks.signedMaskOf(id);
        try challenges.settleUnanswered(id, index) {
            ++challengesUnanswered;
            // only a colluders' commitment holds lines nobody can answer for
            if (unaccountableLine[id] == 0) ghostHonestChallengeUnanswered = true;
            if (_nonSignerLostStake(assigned, before, signed)) ghostChallengeSlashedNonSigner = true;
        } catch {}
    }

    /// @dev The signatures of the first `count` of `assigned` over `c` by the signers they accepted the task with,
    /// empty ones for the rest.
    function _signFirst(uint256 id, IT.Commitment memory c, address[] memory assigned, uint256 count)
        internal
        view
        returns (bytes[] memory sigs)
    {
        sigs = new bytes[](assigned.length);
        for (uint256 i = 0; i < count; ++i) {
            bytes32 digest = tasks.commitmentDigest(id, c, assigned[i]);
            (uint8 v, bytes32 r, bytes32 s) = vm.sign(_keyOfSigner[tasks.signersOf(id)[i]], digest);
            sigs[i] = abi.encodePacked(r, s, v);
        }
    }

    /// @dev `amounts` with a zero share appended.
    function _withZero(uint256[] memory amounts) internal pure returns (uint256[] memory longer) {
        longer = new uint256[](amounts.length + 1);
        for (uint256 i = 0; i < amounts.length; ++i) {
            longer[i] = amounts[i];
        }
    }

    /// @dev `payment` less the coordinator's fee, in `count` random shares.
    function _randomShares(uint256 payment, uint256 count, uint256 seed)
        internal
        view
        returns (uint256[] memory amounts)
    {
        uint256 left = payment - payment * tasks.coordinatorFeeBps() / 10_000;
        amounts = new uint256[](count);
        for (uint256 i = 0; i + 1 < count; ++i) {
            amounts[i] = uint256(keccak256(abi.encode(seed, i))) % (left + 1);
            left -= amounts[i];
        }
        amounts[count - 1] = left;
    }

    /// @dev One time in two waits out the challenge window first.
    function finalizeTask(uint256 taskSeed, uint8 wait) external track {
        uint256 id = _pickTaskMostlyIn(taskSeed, IT.TaskStatus.ResultsCommitted);
        if (id == 0) return;
        uint256 endsAt = tasks.challengeEndsAt(id);
        if (wait % 2 == 0 && endsAt > block.timestamp) _warpTo(endsAt);
        try tasks.finalizeTask(id) {} catch {}
    }

    /// @dev One time in four waits past the deadline first; always so when trying a task in any state.
    function expireTask(uint256 taskSeed, uint8 wait) external track {
        uint256 id =
            _pickTaskMostlyIn(taskSeed, taskSeed % 8 < 4 ? IT.TaskStatus.Open : IT.TaskStatus.Assigned);
        if (id == 0) return;
        uint256 deadline = tasks.getTask(id).deadline;
        if ((wait % 4 == 0 || taskSeed % 4 == 0) && deadline >= block.timestamp) _warpTo(deadline + 1);
        try tasks.expireTask(id) {} catch {}
    }

    /// @dev Anyone refutes the committed usage of a task with one of its leaves; it must go through exactly when
    /// the usage was inflated. The miners whose signatures the commitment carries lose their task lock, to the
    /// audit pool: the owner (often the refuter) gets exactly the task's escrow back, and nobody more.
    function refuteUsage(uint256 taskSeed, uint256 leafSeed) external track {
        uint256 id = _pickTask(taskSeed); // committed or disputed, or any other state (which must revert)
        if (id == 0 || leafCountOf[id] == 0) return;
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        uint256 index = leafSeed % ls.length;
        _resolvingStakeLock = tasks.getTask(id).stakeLock;
        (address[] memory assigned, uint256[] memory before) = _stakesOf(id);
        uint256 signed = tasks.signedMaskOf(id);
        address refuter = owners[leafSeed % owners.length];
        address owner = tasks.getTask(id).owner;
        uint256[4] memory was =
            [escrow.balanceOf(owner), escrow.balanceOf(refuter), escrow.escrowOf(id), escrow.auditPool()];
        vm.prank(refuter);
        try tasks.refuteUsage(id, ls[index], ResultTree.proof(ls, index)) {
            ++refutations;
            if (!usageInflated[id]) ghostHonestUsageRefuted = true;
            if (_nonSignerLostStake(assigned, before, signed)) ghostNonSignerSlashed = true;
            uint256 lost;
            for (uint256 i = 0; i < assigned.length; ++i) {
                lost += before[i] - _stakeOf(assigned[i]);
            }
            if (
                escrow.balanceOf(owner) != was[0] + was[2] || escrow.auditPool() != was[3] + lost
                    || (refuter != owner && escrow.balanceOf(refuter) != was[1])
            ) ghostRefutationPaidAParty = true;
        } catch {}
    }

    // ---- disputes

    function openDispute(uint256 taskSeed, uint256 leafSeed) external track {
        uint256 id = taskSeed % 4 == 0
            ? _pickTask(taskSeed >> 2)
            : _pickLiveTask(taskSeed >> 2, IT.TaskStatus.ResultsCommitted);
        if (id == 0 || leafCountOf[id] == 0) return;
        address owner = tasks.getTask(id).owner;
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        uint256 index = leafSeed % ls.length;
        bytes32[] memory proof = ResultTree.proof(ls, index);
        _mintTo(owner, address(escrow), arbitration.disputeBond());
        vm.prank(owner);
        try arbitration.openDispute(id, ls[index], proof, ResultTree.servedProofs(ls, index)) {
            ++opened;
        } catch {}
    }

    function _currentRound(uint256 id) internal view returns (uint8 r, IA.Round memory round) {
        r = arbitration.getDispute(id).round;
        round = arbitration.roundOf(id, r);
    }

    /// @dev Proves the seed block's random value (forge leaves past blocks without headers) and draws.
    function drawJury(uint256 disputeSeed) external track {
        uint256 id = _pickDispute(disputeSeed);
        if (id == 0) return;
        (, IA.Round memory round) = _currentRound(id);
        if (block.number <= round.seedBlock) vm.roll(round.seedBlock + 1);
        _prove(round.seedBlock, keccak256(abi.encode(disputeSeed, round.seedBlock)));
        try arbitration.drawJury(id) {
            _checkNoPartySeated(id);
            _checkJurorsJudgeTheModel(id);
            _jurorsAct();
        } catch {}
    }

    function _salt(address juror) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", juror));
    }

    /// @dev A random verifier (juror or not) commits a random vote in the current round.
    function commitVote(uint256 disputeSeed, uint256 verifierSeed, bool atFault) external track {
        uint256 id = _pickDispute(disputeSeed);
        if (id == 0) return;
        (uint8 r,) = _currentRound(id);
        address v = verifiers[verifierSeed % verifiers.length];
        IA.Vote choice = atFault ? IA.Vote.MinersAtFault : IA.Vote.MinersCorrect;
        bytes32 commitment = arbitration.voteCommitment(id, r, v, choice, _salt(v));
        vm.prank(v);
        try arbitration.commitVote(id, commitment) {} catch {}
    }

    /// @dev One time in two waits for the commit deadline first; reveals either vote (a wrong one fails).
    function revealVote(uint256 disputeSeed, uint256 verifierSeed, bool atFault, uint8 wait) external track {
        uint256 id = _pickDispute(disputeSeed);
        if (id == 0) return;
        (, IA.Round memory round) = _currentRound(id);
        if (wait % 2 == 0 && round.commitDeadline > block.timestamp) _warpTo(round.commitDeadline);
        address v = verifiers[verifierSeed % verifiers.length];
        vm.prank(v);
        try arbitration.revealVote(id, atFault ? IA.Vote.MinersAtFault : IA.Vote.MinersCorrect, _salt(v)) {}
            catch {}
    }

    /// @dev The owner or a miner appeals, after waiting for the reveal deadline one time in two.
    function appeal(uint256 disputeSeed, uint256 partySeed, uint8 wait) external track {
        uint256 id = _pickDispute(disputeSeed);
        if (id == 0) return;
        IA.Dispute memory d = arbitration.getDispute(id);
        (, IA.Round memory round) = _currentRound(id);
        if (wait % 2 == 0 && round.revealDeadline > block.timestamp) _warpTo(round.revealDeadline);
        address party = partySeed % 2 == 0 ? d.challenger : miners[partySeed % miners.length];
        _mintTo(party, address(escrow), round.bond * 2);
        vm.prank(party);
        try arbitration.appeal(id) {} catch {}
    }

    /// @dev One time in two waits for the round's last deadline first.
    function resolve(uint256 disputeSeed, uint8 wait) external track {
        uint256 id = _pickDispute(disputeSeed);
        if (id == 0) return;
        IA.Dispute memory d = arbitration.getDispute(id);
        (, IA.Round memory round) = _currentRound(id);
        uint256 until = round.commitDeadline == 0 ? round.drawDeadline : round.appealDeadline;
        if (wait % 2 == 0 && until > block.timestamp) _warpTo(until);
        _resolvingStakeLock = tasks.getTask(d.taskId).stakeLock;
        _resolvingCorrectLine = !corrupted(d.taskId, d.requestIndex);
        uint256 pool = escrow.auditPool();
        try arbitration.resolve(id) returns (IA.DisputeStatus outcome) {
            ++resolvedAs[uint8(outcome)];
            _checkHonestMajority(id, outcome);
            _readLogs(vm.getRecordedLogs()); // the slashes of this call (the logs are read once, so here)
            vm.recordLogs();
            _checkSlashPooled(id, pool);
        } catch {}
    }

    /// @dev After `resolve(id)` (its logs read): whatever it slashed, less the jurors' reward, reached the audit
    /// pool, which held `poolBefore` just before. Nothing else a resolution does takes from the pool (an audit's
    /// bond comes back to it, a juror reward paid from it is what the bond's loss frees), so a shortfall is a
    /// slash paid to a party.
    function _checkSlashPooled(uint256 id, uint256 poolBefore) internal {
        uint256 slashed = _slashedSinceSnapshot;
        uint256 pooled = slashed - slashed * arbitration.getDispute(id).terms.rewardBps / 10_000;
        if (escrow.auditPool() < poolBefore + pooled) ghostConvictionPaidAParty = true;
    }

    // ---- verifiers

    /// @notice Registers every verifier (setUp): sybils first at the minimum stake, then the chaos verifiers at
    /// the minimum, the colluders at the minimum, then the honest ones with
    /// 1,000 seats each.
    function registerVerifiers() external {
        for (uint256 i = 0; i < sybils.length; ++i) {
            _stakeVerifier(sybils[i], verifierRegistry.minStake(), _bothModels());
        }
        for (uint256 i = 0; i < verifiers.length; ++i) {
            registerVerifier(i, 0);
        }
        for (uint256 i = 0; i < colluders.length; ++i) {
            _stakeVerifier(colluders[i], verifierRegistry.minStake(), _bothModels());
        }
        // Honest stake dwarfs everyone else's in each model's pool (two 1,000-seat verifiers of each model, against
        // sybils' 6 seats, colluders' 2, chaos at most 40): a jury with a lying majority among its revealed seats
        // is then vanishingly rare, so a correct line is never convicted.
        for (uint256 i = 0; i < honest.length; ++i) {
            _stakeVerifier(
                honest[i], 1_000 * verifierRegistry.minStake(), _oneModel(i % 2 == 0 ? MODEL : OTHER_MODEL)
            );
        }
        for (uint256 i = 0; i < oneSeat.length; ++i) {
            _stakeVerifier(
                oneSeat[i], verifierRegistry.minStake(), _oneModel(i % 2 == 0 ? MODEL : OTHER_MODEL)
            );
        }
    }

    /// @dev A verifier that is not registered (never, or withdrawn) stakes, for one model or both.
    function registerVerifier(uint256 verifierSeed, uint256 stake) public track {
        address v = verifiers[verifierSeed % verifiers.length];
        if (verifierRegistry.verifierOf(v).registeredAtBlock != 0) return;
        stake = _bound(stake, verifierRegistry.minStake(), 1_000e6);
        uint256 pick = (stake / verifierRegistry.minStake() + verifierSeed + 2) % 3; // setUp: each kind
        _stakeVerifier(v, stake, pick == 2 ? _bothModels() : _oneModel(pick == 0 ? MODEL : OTHER_MODEL));
    }

    function _stakeVerifier(address v, uint256 stake, bytes32[] memory models) internal {
        _mintTo(v, address(verifierRegistry), stake);
        vm.prank(v);
        verifierRegistry.register(stake, models);
        for (uint256 i = 0; i < models.length; ++i) {
            _everJudged[v][models[i]] = true;
        }
    }

    /// @notice Records that `v`, registered outside the handler (the test's own verifiers), judges `model`.
    function noteJudge(address v, bytes32 model) external {
        _everJudged[v][model] = true;
    }

    /// @dev A chaos verifier joins or leaves one model's pool.
    function churnVerifierModel(uint256 verifierSeed, bool other) external track {
        address v = verifiers[verifierSeed % verifiers.length];
        bytes32 model = other ? OTHER_MODEL : MODEL;
        vm.prank(v);
        if (verifierRegistry.judges(v, model)) {
            try verifierRegistry.removeModel(model) {} catch {}
        } else {
            try verifierRegistry.addModel(model) {
                _everJudged[v][model] = true;
            } catch {}
        }
    }

    function _oneModel(bytes32 model) internal pure returns (bytes32[] memory models) {
        models = new bytes32[](1);
        models[0] = model;
    }

    function _bothModels() internal pure returns (bytes32[] memory models) {
        models = new bytes32[](2);
        (models[0], models[1]) = (MODEL, OTHER_MODEL);
    }

    /// @dev Anyone reweighs any verifier, at any time: a pool's weight never rises by it, and the verifier's
    /// weights are backed by its stake after it.
    function reweighVerifier(uint256 verifierSeed, uint256 callerSeed) external track {
        address v = verifiers[verifierSeed % verifiers.length];
        uint256 before = verifierRegistry.totalWeight(MODEL) + verifierRegistry.totalWeight(OTHER_MODEL);
        vm.prank(address(uint160(callerSeed)));
        verifierRegistry.reweigh(v);
        uint256 afterwards = verifierRegistry.totalWeight(MODEL) + verifierRegistry.totalWeight(OTHER_MODEL);
        if (afterwards > before || verifierRegistry.needsReweigh(v)) ghostReweighWrong = true;
    }

    function requestVerifierExit(uint256 verifierSeed) external track {
        address v = verifiers[verifierSeed % verifiers.length];
        if (!verifierRegistry.isVerifier(v)) return;
        vm.prank(v);
        verifierRegistry.requestExit();
    }

    /// @dev One time in two waits for the release time first.
    function withdrawVerifierStake(uint256 verifierSeed, uint8 wait) external track {
        address v = verifiers[verifierSeed % verifiers.length];
        uint256 releaseAt = verifierRegistry.verifierOf(v).releaseAt;
        if (wait % 2 == 0 && releaseAt > block.timestamp) _warpTo(releaseAt);
        vm.prank(v);
        try verifierRegistry.withdraw() {} catch {}
    }

    // ---- audits

    function fundAuditPool(uint256 amount) external track {
        amount = _bound(amount, 1, 20e6);
        _mintTo(sponsor, address(escrow), amount);
        vm.prank(sponsor);
        audits.fundAuditPool(amount);
    }

    /// @dev Mostly on a task inside its challenge window; sometimes any task.
    function drawAudit(uint256 taskSeed) external track {
        uint256 id = taskSeed % 4 == 0
            ? _pickTask(taskSeed >> 2)
            : _pickLiveTask(taskSeed >> 2, IT.TaskStatus.ResultsCommitted);
        if (id == 0) return;
        try audits.drawAudit(id) {} catch {}
    }

    /// @dev A task whose audit is drawn and unsealed (`selected`: sealed and selected) or, one time in four, any
    /// task; 0 if none.
    function _pickAudit(uint256 seed, bool selected) internal view returns (uint256) {
        if (seed % 4 == 0) return _pickTask(seed >> 2);
        uint256 count = tasks.taskCount();
        for (uint256 i = 0; i < count; ++i) {
            uint256 id = ((seed >> 2) % count + i) % count + 1;
            IAu.Audit memory a = audits.auditOf(id);
            if (a.seedBlock != 0 && (selected ? a.selected : !a.isSealed)) return id;
        }
        return 0;
    }

    /// @dev Sometimes lets the seed expire unproven first (the audit is then drawn again, forced selected).
    function sealAudit(uint256 taskSeed, uint16 blocks) external track {
        uint256 id = _pickAudit(taskSeed, false);
        if (id == 0) return;
        uint256 seedBlock = audits.auditOf(id).seedBlock;
        vm.roll(block.number + (blocks % 8 == 0 ? 300 : blocks % 6));
        _prove(seedBlock, keccak256(abi.encode(taskSeed, seedBlock)));
        try audits.sealAudit(id) {} catch {}
    }

    /// @dev Proves `value` as the random value of block `number` if it can be proven now (past, within the
    /// block hash window) and was not yet.
    function _prove(uint256 number, bytes32 value) internal {
        if (number >= block.number || number + 256 < block.number || randomness.valueOf(number) != 0) return;
        bytes memory header = Headers.withMixHash(value);
        vm.setBlockhash(number, keccak256(header));
        randomness.prove(number, header);
    }

    /// @dev A selected line of a task, by a random verifier; sometimes the wrong line.
    function openAudit(uint256 taskSeed, uint256 verifierSeed, uint8 wrongLine) external track {
        uint256 id = _pickAudit(taskSeed, true);
        if (id == 0 || leafCountOf[id] == 0) return;
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        uint256 index = audits.auditOf(id).requestIndex;
        if (wrongLine % 8 == 0) index = (index + 1) % ls.length;
        bytes32[] memory proof = ResultTree.proof(ls, index);
        vm.prank(verifiers[verifierSeed % verifiers.length]);
        try audits.openAudit(id, ls[index], proof, ResultTree.servedProofs(ls, index)) {
            ++opened;
            ++audited;
        } catch {}
    }

    // ---- adversaries

    /// @dev After every draw: no party to the task or the dispute holds a seat on this round's jury.
    function _checkNoPartySeated(uint256 id) internal {
        IA.Dispute memory d = arbitration.getDispute(id);
        address[] memory assigned = tasks.minersOf(d.taskId);
        address[] memory pipeline = arbitration.pipelineOf(id);
        address[] memory parties = new address[](3 + 2 * assigned.length + pipeline.length);
        (parties[0], parties[1], parties[2]) = (d.challenger, tasks.coordinatorOf(d.taskId), d.opener);
        for (uint256 i = 0; i < assigned.length; ++i) {
            parties[3 + 2 * i] = assigned[i];
            parties[4 + 2 * i] = tasks.signersOf(d.taskId)[i]; // fixed at assignment, whatever it is now
        }
        for (uint256 i = 0; i < pipeline.length; ++i) {
            parties[3 + 2 * assigned.length + i] = pipeline[i];
        }
        for (uint256 i = 0; i < parties.length; ++i) {
            if (parties[i] != address(0) && arbitration.jurorOf(id, d.round, parties[i]).seats != 0) {
                ghostPartySeated = true;
            }
        }
    }

    /// @dev After every draw: each juror of this round registered (at some time) to judge the dispute's model.
    function _checkJurorsJudgeTheModel(uint256 id) internal {
        IA.Dispute memory d = arbitration.getDispute(id);
        address[] memory jurors = arbitration.jurorsOf(id, d.round);
        for (uint256 i = 0; i < jurors.length; ++i) {
            if (!_everJudged[jurors[i]][d.modelId]) ghostSeatedOutsideItsModels = true;
        }
    }

    /// @dev (a) A sybil verifier opens the audit of a selected task, whatever its line holds.
    function sybilAudit(uint256 taskSeed, uint256 sybilSeed) external track {
        uint256 count = tasks.taskCount();
        uint256 id;
        for (uint256 i = 0; i < count && id == 0; ++i) {
            uint256 candidate = (taskSeed % count + i) % count + 1;
            IAu.Audit memory a = audits.auditOf(candidate);
            if (a.selected && a.disputeId == 0 && leafCountOf[candidate] != 0) id = candidate;
        }
        if (id == 0) return;
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        uint256 index = audits.auditOf(id).requestIndex;
        bytes32[] memory proof = ResultTree.proof(ls, index);
        vm.prank(sybils[sybilSeed % sybils.length]);
        try audits.openAudit(id, ls[index], proof, ResultTree.servedProofs(ls, index)) {
            ++opened;
            ++audited;
            ++sybilAudits;
        } catch {}
    }

    /// @dev (a) A sybil that opened an audit appeals every acquittal (the truth when the line is correct), once
    /// the round's reveal phase is over.
    function sybilAppeal(uint256 disputeSeed) external track {
        uint256 id = _pickOpenWhere(disputeSeed, true);
        if (id == 0) return;
        if (_appealAfterReveal(id, arbitration.getDispute(id).opener, IA.DisputeStatus.MinersCorrect)) {
            ++sybilAppeals;
        }
    }

    /// @dev (b) The colluding owner disputes a line that is correct, on a task the coordinator committed.
    function collusiveDispute(uint256 taskSeed, uint256 leafSeed) external track {
        uint256 id = _pickLiveTask(taskSeed, IT.TaskStatus.ResultsCommitted);
        if (id == 0 || leafCountOf[id] == 0) {
            id = _pickLiveTask(taskSeed, IT.TaskStatus.Disputed);
            if (id == 0 || leafCountOf[id] == 0) return;
        }
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        uint256 index = leafSeed % ls.length;
        for (uint256 i = 0; i < ls.length && corrupted(id, index); ++i) {
            index = (index + 1) % ls.length;
        }
        if (corrupted(id, index)) return;
        address owner = tasks.getTask(id).owner;
        bytes32[] memory proof = ResultTree.proof(ls, index);
        _mintTo(owner, address(escrow), arbitration.disputeBond());
        vm.prank(owner);
        try arbitration.openDispute(id, ls[index], proof, ResultTree.servedProofs(ls, index)) {
            ++opened;
            ++collusiveDisputes;
        } catch {}
    }

    /// @dev (b) The owner appeals every acquittal of a correct line it disputed.
    function collusiveAppeal(uint256 disputeSeed) external track {
        uint256 id = _pickOpenWhere(disputeSeed, false);
        if (id == 0) return;
        IA.Dispute memory d = arbitration.getDispute(id);
        if (d.audit || corrupted(d.taskId, d.requestIndex)) return;
        if (_appealAfterReveal(id, d.challenger, IA.DisputeStatus.MinersCorrect)) ++collusiveAppeals;
    }

    /// @dev (c) A griefing miner of the disputed pipeline appeals every conviction, right or wrong, and never draws
    /// the jury it asked for (anyone else may, through `drawJury`).
    function griefAppeal(uint256 disputeSeed, uint256 minerSeed) external track {
        uint256 id = _pickDispute(disputeSeed);
        if (id == 0) return;
        address[] memory pipeline = arbitration.pipelineOf(id);
        if (pipeline.length == 0 || arbitration.getDispute(id).status != IA.DisputeStatus.Open) return;
        if (_appealAfterReveal(id, pipeline[minerSeed % pipeline.length], IA.DisputeStatus.MinersAtFault)) {
            ++griefAppeals;
        }
    }

    /// @dev (d) A withholding sealer lets the seed expire unproven before sealing: the audit must be drawn
    /// again, forced selected, and never seal as spared.
    function withholdSeal(uint256 taskSeed, uint16 extra) external track {
        uint256 id = _pickAudit(taskSeed | 1, false);
        if (id == 0) return;
        uint256 seedBlock = audits.auditOf(id).seedBlock;
        if (randomness.valueOf(seedBlock) != 0) return; // someone proved it in time
        if (block.number <= seedBlock + 256) vm.roll(seedBlock + 257 + extra % 64);
        try audits.sealAudit(id) {
            ++withheldSeals;
            IAu.Audit memory a = audits.auditOf(id);
            if (a.isSealed || !a.forced || a.seedBlock != block.number + 4) ghostWithheldSealSpared = true;
        } catch {}
    }

    /// @dev (f) A sybil verifier opens a selected audit showing the served proof of only one accountable miner
    /// (the cheater's honest partner), leaving the others out.
    function partialAudit(uint256 taskSeed, uint256 sybilSeed, uint256 keep) external track {
        uint256 id = _pickAudit(taskSeed, true);
        if (id == 0 || leafCountOf[id] == 0 || audits.auditOf(id).disputeId != 0) return;
        ResultLeaf.Leaf[] memory ls = _leaves(id);
        uint256 index = audits.auditOf(id).requestIndex;
        bytes32[][] memory served = _keepOne(ResultTree.servedProofs(ls, index), keep);
        bytes32[] memory proof = ResultTree.proof(ls, index);
        vm.prank(sybils[sybilSeed % sybils.length]);
        try audits.openAudit(id, ls[index], proof, served) {
            ++opened;
            ++audited;
            ++partialAudits;
        } catch {}
    }

    /// @dev `served` with only one proof (the `keep`-th, wrapped) left; the others empty.
    function _keepOne(bytes32[][] memory served, uint256 keep) internal pure returns (bytes32[][] memory) {
        if (served.length == 0) return served;
        uint256 kept = keep % served.length;
        for (uint256 k = 0; k < served.length; ++k) {
            if (k != kept) served[k] = new bytes32[](0);
        }
        return served;
    }

    /// @dev Anyone joins an open dispute with every served proof of its leaf: the pipeline becomes exactly the
    /// leaf's accountable miners (those of its pipeline whose committed served root holds it).
    function joinDispute(uint256 disputeSeed, address joiner) external track {
        uint256 id = _pickDispute(disputeSeed);
        if (id == 0) return;
        IA.Dispute memory d = arbitration.getDispute(id);
        if (leafCountOf[d.taskId] == 0) return;
        ResultLeaf.Leaf[] memory ls = _leaves(d.taskId);
        uint256 index = d.requestIndex;
        if (index >= ls.length || ResultTree.hashLeaf(ls[index]) != d.leafHash) return;
        bytes32[] memory proof = ResultTree.proof(ls, index);
        bytes32[][] memory served = ResultTree.servedProofs(ls, index);
        vm.prank(joiner);
        try arbitration.joinDispute(id, ls[index], proof, served) {
            ++joins;
            _checkJoined(id, d.taskId, ls[index]);
        } catch {}
    }

    function _checkJoined(uint256 id, uint256 taskId, ResultLeaf.Leaf memory leaf) internal {
        address[] memory pipeline = arbitration.pipelineOf(id);
        for (uint256 i = 0; i < pipeline.length; ++i) {
            if (!_answersFor(taskId, pipeline[i], leaf)) ghostUnaccountableJoined = true;
        }
    }

    /// @dev Whether `miner` can answer for the leaf: the leaf names it, and it is an assigned miner of the task
    /// that committed a served root (a miner left out, or one the leaf does not name, never can).
    function _answersFor(uint256 taskId, address miner, ResultLeaf.Leaf memory leaf)
        internal
        view
        returns (bool)
    {
        bool named;
        for (uint256 k = 0; k < leaf.pipeline.length; ++k) {
            if (leaf.pipeline[k] == miner) named = true;
        }
        address[] memory assigned = tasks.minersOf(taskId);
        bytes32[] memory served = tasks.servedRootsOf(taskId);
        for (uint256 i = 0; i < assigned.length; ++i) {
            if (assigned[i] == miner) return named && served[i] != bytes32(0);
        }
        return false;
    }

    /// @dev Anyone settles an audit whose dispute is resolved: the opener's seat comes free, and only a finding
    /// that the miners were correct, or a jury never drawn, costs it the seat's penalty (for the audit pool).
    function settleAudit(uint256 taskSeed) external track {
        uint256 count = tasks.taskCount();
        for (uint256 i = 0; i < count; ++i) {
            uint256 id = (taskSeed % count + i) % count + 1;
            IAu.Audit memory a = audits.auditOf(id);
            if (a.disputeId == 0 || a.settled) continue;
            IA.Dispute memory d = arbitration.getDispute(a.disputeId);
            if (d.status == IA.DisputeStatus.Open) continue;
            // Abandoned: undecided with round 0 seating nobody (never drawn, or no free seat but a party's).
            bool abandoned = d.status == IA.DisputeStatus.NoDecision
                && arbitration.roundOf(a.disputeId, 0).seatsDrawn == 0;
            bool charged = d.status == IA.DisputeStatus.MinersCorrect || abandoned;
            uint256 due = charged ? a.deposit * d.terms.penaltyBps / 10_000 : 0;
            uint256 stakeBefore = verifierRegistry.verifierOf(a.opener).stake;
            audits.settleAudit(id);
            ++auditsSettled;
            if (stakeBefore - verifierRegistry.verifierOf(a.opener).stake != due) {
                ghostAuditSettledWrongly = true;
            }
            return;
        }
    }

    /// @dev (e) A coordinator locking stake without consent: with another task's acceptance, an acceptance of a
    /// smaller lock, or none at all. It must never go through.
    function assignWithoutConsent(uint256 taskSeed, uint256 minerSeed, uint8 how) external track {
        uint256 id = _pickLiveTask(taskSeed, IT.TaskStatus.Open);
        if (id == 0) return;
        address[] memory one = new address[](1);
        one[0] = miners[minerSeed % miners.length];
        uint128 lock = SafeCast.toUint128(tasks.minStakeLock() + 1);
        IT.Acceptance[] memory forged;
        if (how % 3 == 0) {
            forged = _acceptances(tasks, id + 1, one, lock);
        } else if (how % 3 == 1) {
            forged = _acceptances(tasks, id, one, lock - 1);
        } else {
            forged = _acceptances(tasks, id, one, lock);
            forged[0].signature = "";
        }
        vm.prank(coordinator);
        try tasks.assignTask(id, one, lock, forged) {
            ghostLockedWithoutConsent = true;
        } catch {}
    }

    /// @dev An open dispute (an audit opened by a sybil when `bySybil`, else an owner's dispute); 0 if none.
    function _pickOpenWhere(uint256 seed, bool bySybil) internal view returns (uint256) {
        uint256 count = arbitration.disputeCount();
        for (uint256 i = 0; i < count; ++i) {
            uint256 id = (seed % count + i) % count + 1;
            IA.Dispute memory d = arbitration.getDispute(id);
            if (d.status != IA.DisputeStatus.Open) continue;
            bool sybilOpened = d.audit && _isSybil(d.opener);
            if (bySybil ? sybilOpened : !d.audit) return id;
        }
        return 0;
    }

    function _isSybil(address a) internal view returns (bool) {
        for (uint256 i = 0; i < sybils.length; ++i) {
            if (sybils[i] == a) return true;
        }
        return false;
    }

    /// @dev `party` appeals if the current round's jury is drawn and its outcome is `against`, after waiting (with
    /// the jurors acting) for the reveal phase to end.
    function _appealAfterReveal(uint256 id, address party, IA.DisputeStatus against) internal returns (bool) {
        (, IA.Round memory round) = _currentRound(id);
        if (round.commitDeadline == 0) return false;
        if (round.revealDeadline > block.timestamp) _warpTo(round.revealDeadline);
        if (arbitration.getDispute(id).status != IA.DisputeStatus.Open) return false;
        (, round) = _currentRound(id);
        IA.DisputeStatus outcome = round.votesAtFault > round.votesCorrect
            ? IA.DisputeStatus.MinersAtFault
            : round.votesCorrect > round.votesAtFault
                ? IA.DisputeStatus.MinersCorrect
                : IA.DisputeStatus.NoDecision;
        if (outcome != against) return false;
        _mintTo(party, address(escrow), round.bond * 2);
        vm.prank(party);
        try arbitration.appeal(id) {
            return true;
        } catch {
            return false;
        }
    }

    // ---- others

    function withdraw(uint256 accountSeed) external track {
        address[] memory accounts = allAccounts();
        address a = accounts[accountSeed % accounts.length];
        if (escrow.balanceOf(a) == 0) return;
        vm.prank(a);
        escrow.withdraw();
    }

    function warp(uint256 secondsForward) external track {
        _warpTo(block.timestamp + _bound(secondsForward, 1, 12 hours));
    }

    /// @notice Every account the market can credit in this setup.
    function allAccounts() public view returns (address[] memory accounts) {
        accounts = new address[](
            miners.length + owners.length + verifiers.length + sybils.length + honest.length + oneSeat.length
                + 3
        );
        uint256 n;
        for (uint256 i = 0; i < miners.length; ++i) {
            accounts[n++] = miners[i];
        }
        for (uint256 i = 0; i < owners.length; ++i) {
            accounts[n++] = owners[i];
        }
        for (uint256 i = 0; i < verifiers.length; ++i) {
            accounts[n++] = verifiers[i];
        }
        for (uint256 i = 0; i < sybils.length; ++i) {
            accounts[n++] = sybils[i];
        }
        for (uint256 i = 0; i < honest.length; ++i) {
            accounts[n++] = honest[i];
        }
        for (uint256 i = 0; i < oneSeat.length; ++i) {
            accounts[n++] = oneSeat[i];
        }
        accounts[n++] = feeRecipient;
        accounts[n++] = coordinator;
        accounts[n] = sponsor;
    }

    function minerCount() external view returns (uint256) {
        return miners.length;
    }

    /// @notice Every verifier the handler drives: chaos, sybil, honest and colluding.
    function allVerifiers() external view returns (address[] memory all) {
        all = new address[](
            verifiers.length + sybils.length + honest.length + oneSeat.length + colluders.length
        );
        uint256 n;
        for (uint256 i = 0; i < verifiers.length; ++i) {
            all[n++] = verifiers[i];
        }
        for (uint256 i = 0; i < sybils.length; ++i) {
            all[n++] = sybils[i];
        }
        for (uint256 i = 0; i < honest.length; ++i) {
            all[n++] = honest[i];
        }
        for (uint256 i = 0; i < oneSeat.length; ++i) {
            all[n++] = oneSeat[i];
        }
        for (uint256 i = 0; i < colluders.length; ++i) {
            all[n++] = colluders[i];
        }
    }

    /// @notice Ends everything that can end, as anyone may once every deadline has passed: warps past the longest
    /// a task and its disputes can run, resolves every dispute, finalizes or expires every task. Reads the events
    /// like every action, so slashes here are checked too.
    function endEverything() external {
        _answerersAct();
        vm.warp(block.timestamp + ENDS_WITHIN);
        vm.roll(block.number + 300);
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            IA.Dispute memory d = arbitration.getDispute(id);
            if (d.status != IA.DisputeStatus.Open) continue;
            _resolvingStakeLock = tasks.getTask(d.taskId).stakeLock;
            _resolvingCorrectLine = !corrupted(d.taskId, d.requestIndex);
            _snapshotLocks();
            vm.recordLogs();
            uint256 pool = escrow.auditPool();
            IA.DisputeStatus outcome = arbitration.resolve(id);
            _readLogs(vm.getRecordedLogs());
            _checkSlashPooled(id, pool);
            _resolvingCorrectLine = false;
            ++resolvedAs[uint8(outcome)];
            _checkHonestMajority(id, outcome);
        }
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            IAu.Audit memory a = audits.auditOf(id);
            if (a.disputeId != 0 && !a.settled) audits.settleAudit(id);
        }
        // An audit that found nothing gave its task back the window time it ran for.
        vm.warp(block.timestamp + ENDS_WITHIN);
        for (uint256 i = 0; i < _challenged.length; ++i) {
            uint256 id = _challenged[i] >> 32;
            uint256 index = _challenged[i] & type(uint32).max;
            if (challenges.challengeOf(id, index).status != IL.ChallengeStatus.Open) continue;
            _snapshotLocks();
            vm.recordLogs();
            _settleChallenge(id, index);
            _readLogs(vm.getRecordedLogs());
        }
        _snapshotLocks();
        vm.recordLogs();
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            IT.TaskStatus status = tasks.getTask(id).status;
            if (status == IT.TaskStatus.Open || status == IT.TaskStatus.Assigned) tasks.expireTask(id);
            else if (status == IT.TaskStatus.ResultsCommitted) tasks.finalizeTask(id);
        }
        _readLogs(vm.getRecordedLogs());
        _checkStatuses();
    }

    /// @notice Every account withdraws its escrow balance.
    function withdrawAll() external {
        address[] memory accounts = allAccounts();
        for (uint256 i = 0; i < accounts.length; ++i) {
            if (escrow.balanceOf(accounts[i]) == 0) continue;
            vm.prank(accounts[i]);
            escrow.withdraw();
        }
    }
}
