// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {StdInvariant} from "forge-std/StdInvariant.sol";
import {BaseTest} from "../BaseTest.sol";
import {Handler} from "./Handler.sol";
import {IGPURegistry} from "../../src/interfaces/IGPURegistry.sol";
import {ITaskRegistry as IT} from "../../src/interfaces/ITaskRegistry.sol";
import {IArbitration as IA} from "../../src/interfaces/IArbitration.sol";
import {IAudits as IAu} from "../../src/interfaces/IAudits.sol";
import {IVerifierRegistry} from "../../src/interfaces/IVerifierRegistry.sol";

/// @notice Money and state-machine invariants over random sequences of market actions, by honest and adversarial
/// actors together, on tasks of two models: chaos verifiers voting at random (judging one model or both, joining
/// and leaving pools), sybil verifiers (registered first, at the minimum stake) always voting against the truth,
/// honest verifiers with most of the stake and honest one-seat verifiers of one model each beside them, always
/// online; owners disputing
/// correct lines and appealing acquittals with the coordinator's help; miners appealing every conviction and
/// leaving appeal rounds undrawn; sealers withholding audit seals past the blockhash window.
contract MarketInvariantTest is StdInvariant, BaseTest {
    Handler internal handler;

    function setUp() public override {
        super.setUp();
        address[] memory ms = new address[](5);
        uint256[] memory keys = new uint256[](5);
        for (uint256 i = 0; i < 5; ++i) {
            (ms[i], keys[i]) = makeAddrAndKey(string.concat("invariant miner", vm.toString(i)));
        }
        handler = new Handler(
            Handler.Deployment(
                token,
                registry,
                escrow,
                tasks,
                arbitration,
                verifierRegistry,
                challenges,
                audits,
                randomness,
                admin,
                coordinator,
                feeRecipient
            ),
            ms,
            keys
        );
        handler.registerVerifiers();
        for (uint256 i = 0; i < verifiers.length; ++i) {
            handler.noteJudge(verifiers[i], MODEL); // BaseTest's own verifiers judge MODEL
        }
        // Every drawn task is audited (selection itself is tested in Audit.t.sol), from a funded pool.
        _setAuditRate(10_000);
        handler.fundAuditPool(15e6);
        // Each run starts from a market in motion: miners registered; tasks open, assigned, committed, disputed.
        for (uint256 i = 0; i < 3; ++i) {
            handler.register(i, 500e6);
        }
        for (uint256 i = 0; i < 5; ++i) {
            handler.createTask(i, 50e6 + i, 1_000 * (i + 1), 3 days + i, 1e6, 2e6); // the third of OTHER_MODEL
        }
        for (uint256 i = 0; i < 4; ++i) {
            handler.assignTask(i, 0x7, 10e6);
        }
        for (uint256 i = 0; i < 3; ++i) {
            handler.commitResults(i, 40e6, i);
        }
        handler.openDispute(1, 0);
        assertEq(arbitration.disputeCount(), 1);
        // ... and audited: drawn, sealed, one audit open with its jury drawn.
        for (uint256 i = 0; i < 3; ++i) {
            handler.drawAudit(4 * i + 1);
            handler.sealAudit(4 * i + 1, 1);
        }
        handler.openAudit(1, 0, 1);
        assertEq(handler.audited(), 1);
        handler.drawJury(5); // dispute 2, the audit
        assertGt(arbitration.roundOf(2, 0).commitDeadline, 0);
        // Anyone may join it; the join adds nothing the audit's opener already proved.
        handler.joinDispute(4, stranger); // 4: dispute 2 of 2
        assertEq(handler.joins(), 1);

        // Later lifecycle steps are listed more than once, so that runs often reach disputes.
        bytes4[61] memory s = [
            Handler.register.selector,
            Handler.addStake.selector,
            Handler.requestUnstake.selector,
            Handler.withdrawStake.selector,
            Handler.createTask.selector,
            Handler.createTask.selector,
            Handler.cancelTask.selector,
            Handler.assignTask.selector,
            Handler.assignTask.selector,
            Handler.commitResults.selector,
            Handler.commitResults.selector,
            Handler.finalizeTask.selector,
            Handler.finalizeTask.selector,
            Handler.expireTask.selector,
            Handler.openDispute.selector,
            Handler.openDispute.selector,
            Handler.openDispute.selector,
            Handler.drawJury.selector,
            Handler.drawJury.selector,
            Handler.commitVote.selector,
            Handler.commitVote.selector,
            Handler.revealVote.selector,
            Handler.revealVote.selector,
            Handler.appeal.selector,
            Handler.resolve.selector,
            Handler.resolve.selector,
            Handler.registerVerifier.selector,
            Handler.requestVerifierExit.selector,
            Handler.withdrawVerifierStake.selector,
            Handler.fundAuditPool.selector,
            Handler.drawAudit.selector,
            Handler.drawAudit.selector,
            Handler.sealAudit.selector,
            Handler.sealAudit.selector,
            Handler.openAudit.selector,
            Handler.openAudit.selector,
            Handler.withdraw.selector,
            Handler.warp.selector,
            Handler.sybilAudit.selector,
            Handler.sybilAppeal.selector,
            Handler.collusiveDispute.selector,
            Handler.collusiveAppeal.selector,
            Handler.griefAppeal.selector,
            Handler.griefAppeal.selector,
            Handler.withholdSeal.selector,
            Handler.partialAudit.selector,
            Handler.joinDispute.selector,
            Handler.joinDispute.selector,
            Handler.settleAudit.selector,
            Handler.assignWithoutConsent.selector,
            Handler.refuteUsage.selector,
            Handler.setSigner.selector,
            Handler.revokeSigner.selector,
            Handler.releaseTask.selector,
            Handler.vouchAndCommit.selector,
            Handler.commitUnaccountable.selector,
            Handler.challengeLine.selector,
            Handler.challengeLine.selector,
            Handler.settleUnanswered.selector,
            Handler.churnVerifierModel.selector,
            Handler.reweighVerifier.selector
        ];
        bytes4[] memory selectors = new bytes4[](s.length);
        for (uint256 i = 0; i < s.length; ++i) {
            selectors[i] = s[i];
        }
        targetSelector(FuzzSelector({addr: address(handler), selectors: selectors}));
        targetContract(address(handler));
    }

    /// @notice Every property below (`make test`: 256 runs of 64 calls, checked after every 4th call and each
    /// run's last, foundry.toml says why; `make test-deep`: 5,000 runs of 64, checked after every call): one
    /// campaign checks them all at the same states, where a campaign per property paid the handler's calls and
    /// the end-of-run checks once per property.
    function invariant_market() public view {
        registryBalanceEqualsStakes();
        escrowBalanceEqualsLiabilities();
        taskSettlesAtMostOnce();
        payoutWithinEscrow();
        slashWithinLockedStake();
        reweighOnlyLowersToTheStake();
        lockedStakeBacksLiveTasks();
        statusesOnlyMoveForward();
        verifierStakesAndSeats();
        honestMajorityDecides();
        honestMinerNeverLosesStake();
        noPartyOnItsJury();
        withheldSealNeverSpares();
        auditsAndJoinsMoveOnlyWhatTheyMust();
        noLockWithoutConsent();
        auditsOnlyOnSelectedLines();
        onlyFalseUsageIsRefuted();
        refutationSlashesOnlySigners();
        refutationPaysNoParty();
        convictionPaysNoParty();
        revokedSignersSpeakNoMore();
        billedLinesAreAccountable();
        juriesComeFromTheTaskModelsPool();
        tokensConserved();
    }

    /// @dev The registry holds exactly the miners' free, locked and unbonding stake.
    function registryBalanceEqualsStakes() public view {
        uint256 sum;
        for (uint256 i = 0; i < handler.minerCount(); ++i) {
            IGPURegistry.Stake memory s = registry.stakeOf(handler.miners(i));
            sum += uint256(s.free) + s.locked + s.unbonding;
        }
        assertEq(token.balanceOf(address(registry)), sum);
    }

    /// @dev The escrow holds exactly what it owes: open escrows, posted bonds, withdrawable balances and the audit
    /// pool.
    function escrowBalanceEqualsLiabilities() public view {
        uint256 sum = escrow.auditPool();
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            sum += escrow.escrowOf(id);
        }
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            for (uint256 r = 0; r < 3; ++r) {
                sum += escrow.bondOf(id << 8 | r);
            }
        }
        address[] memory accounts = handler.allAccounts();
        for (uint256 i = 0; i < accounts.length; ++i) {
            sum += escrow.balanceOf(accounts[i]);
        }
        assertEq(escrow.arbitrationFloat(), 0, "the float is empty between transactions");
        assertEq(escrow.totalLiabilities(), sum, "liabilities != escrows + bonds + balances + pool");
        assertEq(token.balanceOf(address(escrow)), sum, "balance != liabilities");
    }

    /// @dev Each task is funded once and settled at most once: exactly when it has ended. Same for bonds.
    function taskSettlesAtMostOnce() public view {
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            IT.Task memory t = tasks.getTask(id);
            bool ended = t.status >= IT.TaskStatus.Finalized;
            assertEq(handler.ghostDepositCount(id), 1, "deposits");
            assertEq(handler.ghostSettleCount(id), ended ? 1 : 0, "settlements");
            assertEq(handler.ghostEndEvents(id), ended ? 1 : 0, "end events");
            assertEq(escrow.escrowOf(id), ended ? 0 : t.maxPrice, "escrow held");
        }
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            IA.Dispute memory d = arbitration.getDispute(id);
            bool open = d.status == IA.DisputeStatus.Open;
            for (uint256 r = 0; r <= d.round; ++r) {
                assertEq(handler.ghostBondSettleCount(id << 8 | r), open ? 0 : 1, "bond settlements");
            }
        }
    }

    /// @dev Miners and coordinator never get more than the escrow; payout plus refund is exactly the escrow; a
    /// cancelled, expired or at-fault task pays nobody.
    function payoutWithinEscrow() public view {
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            IT.Task memory t = tasks.getTask(id);
            uint256 paid = handler.ghostPaidOut(id);
            assertEq(handler.ghostDeposited(id), t.maxPrice, "deposit == maxPrice");
            assertLe(paid, t.maxPrice, "paid out <= escrow");
            if (handler.ghostSettleCount(id) == 0) continue;
            assertEq(paid + handler.ghostRefunded(id), t.maxPrice, "paid + refund");
            assertTrue(paid == 0 || paid == t.payment, "pays the committed payment or nothing");
            if (t.status != IT.TaskStatus.Finalized) assertEq(paid, 0, "refunded tasks pay nobody");
        }
    }

    /// @dev A slash never exceeds the stake locked at that moment and is one task lock.
    function slashWithinLockedStake() public view {
        assertFalse(handler.ghostSlashAboveLock(), "slash above locked stake");
        assertFalse(handler.ghostSlashNotTaskLock(), "slash != task stake lock");
        assertFalse(handler.ghostUnlockAboveLock(), "unlock above locked stake");
    }

    /// @dev Anyone's `reweigh` only lowers weight, and to what the stake backs.
    function reweighOnlyLowersToTheStake() public view {
        assertFalse(handler.ghostReweighWrong(), "reweigh raised a weight or left one unbacked");
    }

    /// @dev Locked stake is exactly the locks of the tasks still in progress.
    function lockedStakeBacksLiveTasks() public view {
        uint256 expected;
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            IT.Task memory t = tasks.getTask(id);
            if (t.status >= IT.TaskStatus.Assigned && t.status <= IT.TaskStatus.Disputed) {
                expected += uint256(t.stakeLock) * t.minerCount;
            }
        }
        uint256 locked;
        for (uint256 i = 0; i < handler.minerCount(); ++i) {
            locked += registry.stakeOf(handler.miners(i)).locked;
        }
        assertEq(locked, expected);
    }

    /// @dev Task and dispute statuses only move forward, and ended ones never change. Only an uncommitted task is
    /// cancelled (by its owner before assignment, or released by its coordinator), and only an uncommitted one
    /// expires; a task a miner vouched for (served and signed) is never released.
    function statusesOnlyMoveForward() public view {
        assertFalse(handler.ghostStatusRegressed(), "task status went back");
        assertFalse(handler.ghostDisputeStatusRegressed(), "dispute status went back");
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            IT.Task memory t = tasks.getTask(id);
            if (t.status == IT.TaskStatus.Cancelled) assertEq(t.committedAt, 0, "cancelled after commit");
            if (t.status == IT.TaskStatus.Expired) assertEq(t.committedAt, 0, "expired after commit");
            if (handler.ghostVouched(id)) {
                assertTrue(t.status != IT.TaskStatus.Cancelled, "vouched, released");
            }
        }
    }

    /// @dev The verifier registry holds exactly the verifiers' stakes (the handler's and BaseTest's), and each
    /// verifier has exactly one seat stake locked per seat it holds in an open dispute (seats are drawn whatever is
    /// locked, so that may exceed its stake: its penalties stop at the stake, and the escrow's solvency covers
    /// what they pay). Seats are tallied once per open round (every juror must be a known verifier), then compared.
    function verifierStakesAndSeats() public view {
        address[] memory handlers = handler.allVerifiers();
        address[] memory all = new address[](handlers.length + verifiers.length);
        for (uint256 i = 0; i < handlers.length; ++i) {
            all[i] = handlers[i];
        }
        for (uint256 i = 0; i < verifiers.length; ++i) {
            all[handlers.length + i] = verifiers[i];
        }
        uint256[] memory held = new uint256[](all.length);
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            IA.Dispute memory d = arbitration.getDispute(id);
            if (d.status != IA.DisputeStatus.Open) continue;
            for (uint8 r = 0; r <= d.round; ++r) {
                address[] memory jurors = arbitration.jurorsOf(id, r);
                for (uint256 j = 0; j < jurors.length; ++j) {
                    held[_indexOf(all, jurors[j])] += uint256(arbitration.jurorOf(id, r, jurors[j]).seats)
                    * d.terms.seatStake;
                }
            }
        }
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            IAu.Audit memory a = audits.auditOf(id);
            if (a.disputeId != 0 && !a.settled) held[_indexOf(all, a.opener)] += a.deposit;
        }
        uint256 sum;
        for (uint256 i = 0; i < all.length; ++i) {
            IVerifierRegistry.Verifier memory record = verifierRegistry.verifierOf(all[i]);
            assertEq(record.locked, held[i], "locked == seats held in open disputes and unsettled audits");
            sum += record.stake;
        }
        assertEq(token.balanceOf(address(verifierRegistry)), sum);
    }

    function _indexOf(address[] memory accounts, address account) internal pure returns (uint256 i) {
        while (i < accounts.length && accounts[i] != account) ++i;
        assertLt(i, accounts.length, "a juror that is no known verifier");
    }

    /// @dev Honest miners never lose stake: no line that was correct was ever slashed, and no dispute ended against
    /// the truth while honest jurors revealed most of its deciding round's seats.
    function honestMajorityDecides() public view {
        assertFalse(handler.ghostHonestMinerSlashed(), "a miner was slashed over a correct line");
        assertFalse(handler.ghostHonestMajorityOverruled(), "an honest majority was overruled");
    }

    /// @dev Per miner, stake is exactly what it put in, less what it withdrew and what was slashed; and it is
    /// slashed only over a line the handler corrupted: a miner that served only correct lines never loses stake,
    /// whatever the sybils, colluders and griefers did.
    function honestMinerNeverLosesStake() public view {
        for (uint256 i = 0; i < handler.minerCount(); ++i) {
            address m = handler.miners(i);
            IGPURegistry.Stake memory s = registry.stakeOf(m);
            assertEq(
                uint256(s.free) + s.locked + s.unbonding,
                handler.ghostStakeIn(m) - handler.ghostStakeOut(m) - handler.ghostSlashedOf(m),
                "stake == in - out - slashed"
            );
            assertEq(handler.ghostSlashedOverCorrectLine(m), 0, "slashed over a correct line");
        }
        assertFalse(handler.ghostHonestMinerSlashed(), "a miner was slashed over a correct line");
    }

    /// @dev No party to a task (owner, coordinator, assigned miner or its signer, opener, pipeline) was ever drawn
    /// onto a jury of its dispute, though the colluding owner and coordinator are staked verifiers.
    function noPartyOnItsJury() public view {
        assertFalse(handler.ghostPartySeated(), "a party sat on its own jury");
    }

    /// @dev Withholding an audit's seal past the blockhash window never spares the task: it is drawn again and
    /// forced selected (fails closed for the miner).
    function withheldSealNeverSpares() public view {
        assertFalse(handler.ghostWithheldSealSpared(), "a withheld seal spared the task");
    }

    /// @dev A dispute's pipeline only ever holds miners accountable for its leaf, however it was opened or joined;
    /// an audit's opener loses its seat's penalty exactly when the miners are found correct or it left the jury
    /// undrawn.
    function auditsAndJoinsMoveOnlyWhatTheyMust() public view {
        assertFalse(handler.ghostUnaccountableJoined(), "a joined pipeline holds a miner not accountable");
        assertFalse(handler.ghostAuditSettledWrongly(), "an audit's opener lost the wrong amount");
    }

    /// @dev No stake is ever locked for a task without the miner's consent to that task and lock.
    function noLockWithoutConsent() public view {
        assertFalse(handler.ghostLockedWithoutConsent(), "stake was locked without consent");
    }

    /// @dev An audit is a dispute on the selected line of a selected task, on the owner's behalf; a task has at
    /// most one owner dispute and one audit, each in its own slot.
    function auditsOnlyOnSelectedLines() public view {
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            IA.Dispute memory d = arbitration.getDispute(id);
            uint256 slot = d.audit ? audits.auditOf(d.taskId).disputeId : arbitration.disputeOfTask(d.taskId);
            // An audit left without a jury may be opened again: only then does its slot move on to a later one.
            bool abandoned =
                d.status == IA.DisputeStatus.NoDecision && arbitration.roundOf(id, 0).seatsDrawn == 0;
            if (!(d.audit && abandoned && slot > id)) {
                assertEq(slot, id, "one owner dispute and one audit per task");
            }
            assertEq(d.challenger, tasks.getTask(d.taskId).owner, "the owner is the challenger");
            if (!d.audit) continue;
            IAu.Audit memory a = audits.auditOf(d.taskId);
            assertTrue(a.selected, "audited task selected");
            assertEq(d.requestIndex, a.requestIndex, "audited line");
            uint256 requestCount = tasks.getTask(d.taskId).requestCount;
            assertEq(
                a.requestIndex, uint256(keccak256(abi.encode(a.seed, uint256(1)))) % requestCount, "line"
            );
        }
    }

    /// @dev A committed usage is refuted only when it is not what the leaves add up to.
    function onlyFalseUsageIsRefuted() public view {
        assertFalse(handler.ghostHonestUsageRefuted(), "a true usage was refuted");
    }

    /// @dev A refutation takes stake only from miners whose signature the refuted commitment carries: a miner
    /// committed without its signature (a spare, one left out) never vouched for the false totals.
    function refutationSlashesOnlySigners() public view {
        assertFalse(handler.ghostNonSignerSlashed(), "a refutation slashed a miner that did not sign");
    }

    /// @dev A refutation's slashed locks go to the audit pool, no party's: the owner gets exactly its escrow
    /// back and the refuter nothing, so nobody profits from a refutation it arranged (a thief of a signer key).
    function refutationPaysNoParty() public view {
        assertFalse(handler.ghostRefutationPaidAParty(), "a refutation paid a party more than its escrow");
    }

    /// @dev A conviction's slash goes, less the jurors' reward, to the audit pool: no party (an owner that signed
    /// the line with a miner's leaked key, or its sybil auditor) is paid a miner's lock.
    function convictionPaysNoParty() public view {
        assertFalse(handler.ghostConvictionPaidAParty(), "a conviction paid a party part of the slash");
    }

    /// @dev A signer its miner revoked on a task (a leaked key) can neither vouch for nor sign that task's results.
    function revokedSignersSpeakNoMore() public view {
        assertFalse(handler.ghostRevokedSignerSpoke(), "a revoked signer vouched or signed");
    }

    /// @dev Every billed line is answered for: a challenge of an honest commitment is always answered (its miners
    /// are online), an unanswered one takes stake only from the commitment's signers, and an owner that challenged
    /// the line colluders billed without a signer answering for it never pays for the task.
    function billedLinesAreAccountable() public view {
        assertFalse(
            handler.ghostHonestChallengeUnanswered(), "a challenge of an honest commitment went unanswered"
        );
        assertFalse(handler.ghostChallengeSlashedNonSigner(), "an unanswered challenge slashed a non-signer");
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            if (handler.ghostUnaccountableChallenged(id)) {
                assertEq(handler.ghostPaidOut(id), 0, "paid a line no one answers for");
            }
        }
    }

    /// @dev Every juror of every draw judges its dispute's model (tasks of two models; verifiers of one model or
    /// both, joining and leaving pools): so no verifier, one-seat or whale, sits on, or loses stake over, a
    /// dispute of a model it does not judge.
    function juriesComeFromTheTaskModelsPool() public view {
        assertFalse(handler.ghostSeatedOutsideItsModels(), "a juror seated on a model it does not judge");
    }

    /// @dev No token is created or destroyed by the market.
    function tokensConserved() public view {
        uint256 held = token.balanceOf(address(registry)) + token.balanceOf(address(escrow))
            + token.balanceOf(address(verifierRegistry));
        address[] memory accounts = handler.allAccounts();
        for (uint256 i = 0; i < accounts.length; ++i) {
            held += token.balanceOf(accounts[i]);
        }
        assertEq(held, token.totalSupply());
    }

    /// @dev The handler's own counts agree with the contracts; then, once every deadline has passed, anyone can
    /// end every dispute and task, and every token becomes withdrawable: no escrow, bond, float or seat lock is
    /// left, and the escrow still holds exactly what it owes.
    function afterInvariant() public {
        _checkCounts();
        _endAndCheck();
    }

    /// @dev The bounded-time property on a fixed adversarial sequence from setUp's market: a cartel overstates a
    /// task's usage and is refuted, sybils audit and appeal, the colluding owner disputes correct lines and
    /// appeals acquittals, a griefing miner appeals convictions and never draws, a sealer withholds; then
    /// everything ends within `ENDS_WITHIN` twice over.
    function test_everythingEndsWithinBoundedTime() public {
        handler.createTask(1, 100e6, 6, 3 days, 1e6, 2e6);
        handler.createTask(2, 100e6, 6, 3 days, 1e6, 2e6);
        for (uint256 k = 0; k < tasks.taskCount(); ++k) {
            handler.assignTask(k, 0x7, 10e6);
            handler.commitResults(k, 40e6, k + 11);
        }
        // The sixth commit (seed 16) came from a cartel that overstated its task's usage; an owner refutes it.
        uint256 inflated = 1;
        while (!handler.usageInflated(inflated)) ++inflated;
        handler.refuteUsage(inflated - 1, 0);
        assertEq(handler.refutations(), 1);
        assertEq(uint8(tasks.getTask(inflated).status), uint8(IT.TaskStatus.Finalized));
        handler.sybilAudit(2, 2);
        handler.collusiveDispute(0, 1);
        handler.collusiveDispute(2, 3);
        // An honest owner disputes a corrupted line, so that a griefing miner has a conviction to appeal.
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            if (tasks.getTask(id).status != IT.TaskStatus.ResultsCommitted) continue;
            for (uint256 j = 0; j < tasks.getTask(id).requestCount; ++j) {
                if (handler.corrupted(id, j)) {
                    handler.openDispute(4 * (id - 1), j);
                    break;
                }
            }
        }
        // A draw on a committed task, then its seal withheld past the blockhash window.
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            if (tasks.getTask(id).status != IT.TaskStatus.ResultsCommitted) continue;
            if (audits.auditOf(id).seedBlock != 0) continue;
            audits.drawAudit(id);
            handler.withholdSeal(id - 1, 3);
            break;
        }
        for (uint256 i = 0; i < 8; ++i) {
            for (uint256 d = 0; d < arbitration.disputeCount(); ++d) {
                handler.drawJury(4 * d);
                handler.griefAppeal(4 * d, i);
            }
            handler.sybilAppeal(i);
            handler.collusiveAppeal(i);
            handler.warp(6 hours);
        }
        handler.resolve(1, 0);
        _checkCounts();
        emit log_named_uint("sybil audits", handler.sybilAudits());
        emit log_named_uint("sybil appeals", handler.sybilAppeals());
        emit log_named_uint("collusive disputes", handler.collusiveDisputes());
        emit log_named_uint("collusive appeals", handler.collusiveAppeals());
        emit log_named_uint("grief appeals", handler.griefAppeals());
        emit log_named_uint("withheld seals", handler.withheldSeals());
        emit log_named_uint("partial audits", handler.partialAudits());
        emit log_named_uint("joins", handler.joins());
        uint256 start = block.timestamp;
        _endAndCheck();
        assertLe(block.timestamp - start, 2 * handler.ENDS_WITHIN(), "bounded time");
        honestMinerNeverLosesStake();
        noPartyOnItsJury();
        withheldSealNeverSpares();
        tokensConserved();
    }

    /// @dev Ends everything, then checks that every task and dispute has ended and every token is withdrawable:
    /// once every account withdraws, the escrow holds only the audit pool and no verifier has a seat locked.
    function _endAndCheck() internal {
        handler.endEverything();
        for (uint256 id = 1; id <= tasks.taskCount(); ++id) {
            assertGe(uint8(tasks.getTask(id).status), uint8(IT.TaskStatus.Finalized), "task ended");
            assertEq(escrow.escrowOf(id), 0, "escrow released");
        }
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            assertGt(uint8(arbitration.getDispute(id).status), uint8(IA.DisputeStatus.Open), "dispute ended");
        }
        escrowBalanceEqualsLiabilities();
        verifierStakesAndSeats();
        lockedStakeBacksLiveTasks();
        honestMajorityDecides();
        honestMinerNeverLosesStake();
        statusesOnlyMoveForward();
        taskSettlesAtMostOnce();
        billedLinesAreAccountable();
        refutationPaysNoParty();
        convictionPaysNoParty();
        handler.withdrawAll();
        assertEq(token.balanceOf(address(escrow)), escrow.auditPool(), "only the audit pool is left");
        address[] memory all = handler.allVerifiers();
        for (uint256 i = 0; i < all.length; ++i) {
            assertEq(verifierRegistry.verifierOf(all[i]).locked, 0, "seat locks released");
        }
        tokensConserved();
    }

    function _checkCounts() internal view {
        assertEq(handler.created(), tasks.taskCount(), "tasks created");
        assertEq(handler.opened(), arbitration.disputeCount(), "disputes opened");
        uint256 audits;
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            if (arbitration.getDispute(id).audit) ++audits;
        }
        assertEq(handler.audited(), audits, "audits opened");
        uint256 resolved;
        for (uint256 id = 1; id <= arbitration.disputeCount(); ++id) {
            if (uint8(arbitration.getDispute(id).status) > 1) ++resolved;
        }
        assertEq(handler.resolvedAs(2) + handler.resolvedAs(3) + handler.resolvedAs(4), resolved, "resolved");
    }
}
