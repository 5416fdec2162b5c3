// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ResultLeaf} from "../libraries/ResultLeaf.sol";

/// @title IAudits
/// @notice Random audits of committed tasks, paid from the audit pool: anyone draws a task's audit inside its
/// challenge window; a later block's random value decides whether it is selected and which line; an active verifier that
/// is not a party opens the audit's dispute over that line (in `IArbitration`), staking one seat on it: the seat's
/// juror penalty goes to the audit pool if the miners are found correct or the opener leaves the jury undrawn
/// (then anyone may open the audit again). A seed nobody sealed in time never lets the
/// task escape: the audit is drawn again and selected whatever the new seed says.
interface IAudits {
    /// @notice A task's audit. `seedBlock`: the block whose random value seeds it (0: never drawn). `forced`: a
    /// seed of it expired unproven, so it is selected whatever the seed says. `isSealed`: the draw is final.
    /// `disputeId`: the audit's dispute (0: none yet). `opener` staked `deposit` of its verifier stake on it,
    /// locked until `settleAudit`.
    struct Audit {
        uint64 seedBlock;
        bool forced;
        bool isSealed;
        bool selected;
        bool settled;
        uint32 requestIndex;
        bytes32 seed;
        uint256 disputeId;
        address opener;
        uint128 deposit;
    }

    error AuditsDisabled();
    error AuditAlreadyDrawn(uint256 taskId, uint256 seedBlock);
    error AuditNotDrawn(uint256 taskId);
    error AuditAlreadySealed(uint256 taskId);
    error AuditSeedNotReady(uint256 taskId, uint256 readyAtBlock);
    error AuditNotSealed(uint256 taskId);
    error TaskNotSelected(uint256 taskId);
    error AuditAlreadyOpened(uint256 taskId, uint256 disputeId);
    error NotAuditedLine(uint256 taskId, uint256 requestIndex, uint256 selectedIndex);
    error AuditorStakeBusy(address auditor, uint256 deposit);
    error AuditNotOpened(uint256 taskId);
    error AuditStillOpen(uint256 taskId, uint256 disputeId);
    error AuditAlreadySettled(uint256 taskId);

    event AuditDrawn(uint256 indexed taskId, uint256 seedBlock, bool forced);
    event AuditSealed(uint256 indexed taskId, bytes32 seed, bool selected, uint32 requestIndex);
    event AuditOpened(
        uint256 indexed disputeId, uint256 indexed taskId, address indexed auditor, uint128 deposit
    );
    event AuditSettled(uint256 indexed taskId, address indexed auditor, uint256 penalty);

    /// @notice Adds `amount` to the audit pool (held by the escrow), which posts the bonds of audits.
    function fundAuditPool(uint256 amount) external;
    /// @notice Starts a task's audit draw: its seed will be the random value of the block SEED_DELAY_BLOCKS on.
    function drawAudit(uint256 taskId) external;
    /// @notice Fixes the drawn audit: selected or not, and which line. A seed that can no longer become known
    /// draws the audit again, selected whatever its new seed says (returns false: not sealed yet).
    function sealAudit(uint256 taskId) external returns (bool selected);
    /// @notice Opens the dispute of the selected line as the task's audit: an active verifier that is not a
    /// party, staking one seat of its stake (the verifier registry's minimum stake) until the audit settles. An
    /// audit whose dispute ended with no jury drawn is settled and opened again.
    function openAudit(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external returns (uint256 disputeId);
    /// @notice Anyone, once the audit's dispute is resolved: unlocks the opener's seat; if the miners were found
    /// correct or its jury was never drawn, the seat's juror penalty goes to the audit pool.
    function settleAudit(uint256 taskId) external returns (uint256 penalty);
    /// @notice The audit of a task: its draw, whether sealed and selected, its dispute and its opener.
    function auditOf(uint256 taskId) external view returns (Audit memory);
}
