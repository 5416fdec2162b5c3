// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Checkpoints} from "@openzeppelin/contracts/utils/structs/Checkpoints.sol";
import {IVerifierRegistry} from "./interfaces/IVerifierRegistry.sol";
import {Sortition} from "./libraries/Sortition.sol";
import {Versions} from "./libraries/Versions.sol";

/// @title VerifierRegistry
/// @notice The verifiers' stake and their weight in jury draws, as GPURegistry is the miners'. Voting power comes
/// from stake, not from addresses: a registration's weight is its stake in whole seats, fixed when it joins a
/// model's pool and removed when it leaves it or exits, and a round's draw reads the sortition as it stood when the
/// round opened (before its seed could be known), so no registration or exit after that changes it. Juries are
/// drawn per model: each model hash (a checkpoint) has its own sortition, holding the verifiers that registered
/// to judge it, so a dispute of a task never seats a verifier that cannot re-run its model (and would lose a
/// silent seat's penalty). Only Arbitration (ARBITER_ROLE) locks seats and takes penalties; a verifier's locked
/// stake cannot leave until its seats are released.
contract VerifierRegistry is IVerifierRegistry, AccessControl {
    using SafeCast for uint256;
    using SafeERC20 for IERC20;
    using Sortition for Sortition.Pool;
    using Checkpoints for Checkpoints.Trace208;

    /// @notice Role of the arbitration contract: locks seats and releases them with penalties.
    bytes32 public constant ARBITER_ROLE = keccak256("ARBITER_ROLE");
    uint256 public constant MAX_UNBONDING = 30 days;
    /// @notice Longer than any round's drawing phase (Arbitration.MAX_PHASE): a verifier that exits after a round
    /// opened, which the round's draw still reads as staked, cannot withdraw before that draw locks its seats.
    uint256 public constant MIN_UNBONDING = 2 days;

    IERC20 public immutable token;
    /// @notice Where penalties go (the payment escrow, which shares them out to coherent jurors).
    address public immutable penaltySink;

    /// @inheritdoc IVerifierRegistry
    uint256 public minStake;
    /// @inheritdoc IVerifierRegistry
    uint256 public unbondingPeriod;

    /// @notice Draws per seat before a jury is left short.
    uint256 public constant DRAW_ATTEMPTS_PER_SEAT = 4;
    /// @notice Most models one verifier judges: each is a sortition entry that every exit updates.
    uint256 public constant MAX_MODELS = 4;

    /// @dev A round's draw (`drawSeats`): the model whose pool it draws from, the block whose sortition it reads
    /// (`atBlock`), the parties' ranges cut out of it (`cuts` of them, by start), the `weight` left, and the stake
    /// each seat locks.
    struct Draw {
        bytes32 model;
        uint256 atBlock;
        uint256 weight;
        uint256 seatStake;
        uint256 cuts;
        uint256[] cutStarts;
        uint256[] cutWeights;
    }

    /// @dev One sortition per model hash.
    mapping(bytes32 model => Sortition.Pool) private _pools;
    /// @dev Every minimum stake ever set, and the time from which each applies (for `minStakeAt`).
    uint256[] private _minStakes;
    uint64[] private _minStakeSince;
    mapping(address account => Verifier) private _verifiers;
    /// @dev Each verifier's entry in a model's pool, plus one (0: never joined it). An entry is the verifier's for
    /// good: leaving a pool sets its weight to zero, joining it again restores it in place.
    mapping(bytes32 model => mapping(address account => uint256)) private _entryPlusOne;
    /// @dev The stake each verifier's entry in a model's pool was weighed with (its weight's backing), by block.
    mapping(bytes32 model => mapping(address account => Checkpoints.Trace208)) private _backing;
    /// @dev Each verifier's stake by block: a round's draw reads it as it stood when the round opened.
    mapping(address account => Checkpoints.Trace208) private _stakes;
    /// @dev Stake an audit's opener locked as its deposit (`lockSeat`): jury penalties never take it.
    mapping(address account => uint256) private _deposits;
    /// @dev The models each verifier judges now.
    mapping(address account => bytes32[]) private _models;

    constructor(
        IERC20 token_,
        address penaltySink_,
        address admin,
        uint256 minStake_,
        uint256 unbondingPeriod_
    ) {
        if (address(token_) == address(0) || penaltySink_ == address(0) || admin == address(0)) {
            revert ZeroAddress();
        }
        token = token_;
        penaltySink = penaltySink_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setMinStake(minStake_);
        _setUnbondingPeriod(unbondingPeriod_);
    }

    // ------------------------------------------------------------------------------------------ verifiers

    /// @inheritdoc IVerifierRegistry
    /// @dev A token that delivers less than `stake` (a fee on transfer) is refused.
    function register(uint256 stake, bytes32[] calldata models) external {
        Verifier storage verifier = _verifiers[msg.sender];
        if (verifier.registeredAtBlock != 0) revert VerifierAlreadyRegistered(msg.sender);
        uint256 seat = minStake;
        if (stake < seat) revert VerifierStakeTooLow(stake, seat);
        if (models.length == 0) revert NoModels();
        verifier.stake = stake.toUint128();
        _recordStake(msg.sender, stake);
        verifier.registeredAtBlock = block.number.toUint64();
        emit VerifierRegistered(msg.sender, stake, stake / seat);
        for (uint256 i = 0; i < models.length; ++i) {
            _join(msg.sender, verifier, models[i]);
        }
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(msg.sender, address(this), stake);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != stake) revert TransferShortfall(stake, received);
    }

    /// @inheritdoc IVerifierRegistry
    function addModel(bytes32 model) external {
        Verifier storage verifier = _verifiers[msg.sender];
        if (verifier.stake == 0 || verifier.exitAtBlock != 0) revert NotVerifier(msg.sender);
        _join(msg.sender, verifier, model);
    }

    /// @inheritdoc IVerifierRegistry
    /// @dev Like an exit, for one model: rounds of it opened earlier may still draw the verifier.
    function removeModel(bytes32 model) external {
        uint256 count = _models[msg.sender].length;
        uint256 i;
        while (i < count && _models[msg.sender][i] != model) ++i; // at most MAX_MODELS
        if (i == count) revert NotJudgingModel(msg.sender, model);
        _models[msg.sender][i] = _models[msg.sender][count - 1];
        _models[msg.sender].pop();
        _pools[model].remove(_entryPlusOne[model][msg.sender] - 1);
        emit VerifierModelRemoved(msg.sender, model);
    }

    /// @inheritdoc IVerifierRegistry
    /// @dev Weight lost to penalties is dead weight until this runs: a landing on it is lost (`_lands`), so a pool
    /// mostly made of it draws juries short. Anyone may run it; it only ever lowers a weight to what the stake
    /// backs now (rounded down to whole seats of the old unit).
    function reweigh(address account) external {
        uint256 stake = _verifiers[account].stake;
        bytes32[] storage models = _models[account];
        for (uint256 i = 0; i < models.length; ++i) {
            bytes32 model = models[i];
            Checkpoints.Trace208 storage backing = _backing[model][account];
            uint256 weighed = backing.latest();
            if (stake >= weighed) continue;
            uint256 index = _entryPlusOne[model][account] - 1;
            uint256 weight = _pools[model].weightAt(index, block.number) * stake / weighed;
            _pools[model].reweigh(index, weight);
            backing.push(uint48(block.number), uint208(stake));
            emit VerifierReweighed(account, model, weight);
        }
    }

    /// @inheritdoc IVerifierRegistry
    function requestExit() external {
        Verifier storage verifier = _verifiers[msg.sender];
        if (verifier.stake == 0) revert NotVerifier(msg.sender);
        if (verifier.exitAtBlock != 0) revert VerifierExitAlreadyRequested(msg.sender, verifier.releaseAt);
        uint64 releaseAt = (block.timestamp + unbondingPeriod).toUint64();
        verifier.exitAtBlock = block.number.toUint64();
        verifier.releaseAt = releaseAt;
        // Its weight leaves every pool from this block on: rounds opened later never land on it.
        bytes32[] storage models = _models[msg.sender];
        for (uint256 i = 0; i < models.length; ++i) {
            bytes32 model = models[i];
            _pools[model].remove(_entryPlusOne[model][msg.sender] - 1);
        }
        emit VerifierExitRequested(msg.sender, releaseAt);
    }

    /// @inheritdoc IVerifierRegistry
    /// @dev The address keeps its registration block, so it can never register again (its old sortition entry
    /// would otherwise count twice).
    function withdraw() external returns (uint256 amount) {
        Verifier storage verifier = _verifiers[msg.sender];
        amount = verifier.stake;
        if (amount == 0) revert NotVerifier(msg.sender);
        if (verifier.exitAtBlock == 0) revert VerifierExitNotRequested(msg.sender);
        if (block.timestamp < verifier.releaseAt) {
            revert VerifierUnbondingNotFinished(verifier.releaseAt, block.timestamp);
        }
        if (verifier.locked != 0) revert VerifierStakeLocked(msg.sender, verifier.locked);
        verifier.stake = 0;
        _recordStake(msg.sender, 0);
        token.safeTransfer(msg.sender, amount);
        emit VerifierStakeWithdrawn(msg.sender, amount);
    }

    // ------------------------------------------------------------------------------------------ arbitration

    /// @inheritdoc IVerifierRegistry
    /// @dev At most DRAW_ATTEMPTS_PER_SEAT draws per seat: a lost draw (on weight whose stake penalties had taken
    /// by the round's opening, see `_lands`) is not drawn again past them, so a round is drawn short rather than
    /// at any gas cost.
    function drawSeats(
        bytes32 model,
        uint256 seed,
        uint256 atBlock,
        uint256 seats,
        uint256 seatStake,
        address[] calldata parties
    ) external onlyRole(ARBITER_ROLE) returns (address[] memory drawn) {
        drawn = new address[](seats);
        Draw memory draw = _drawWithout(model, parties, atBlock, seatStake);
        uint256 filled;
        if (draw.weight != 0) {
            uint256 attempts = seats * DRAW_ATTEMPTS_PER_SEAT;
            for (uint256 attempt = 0; filled < seats && attempt < attempts; ++attempt) {
                address account = _lands(uint256(keccak256(abi.encode(seed, attempt))), draw);
                if (account != address(0)) drawn[filled++] = account;
            }
        }
        assembly ("memory-safe") {
            mstore(drawn, filled)
        }
    }

    /// @inheritdoc IVerifierRegistry
    /// @dev Unlike a jury seat (`_lands`), only out of free stake: what an audit's opener locks bounds its audits,
    /// and jury penalties never take it (`releaseSeat`); `releaseDeposit` releases it.
    function lockSeat(address account, uint256 amount) external onlyRole(ARBITER_ROLE) returns (bool) {
        Verifier storage verifier = _verifiers[account];
        if (verifier.exitAtBlock != 0 || verifier.locked + amount > verifier.stake) return false;
        verifier.locked += amount.toUint128();
        _deposits[account] += amount;
        emit SeatLocked(account, amount);
        return true;
    }

    /// @inheritdoc IVerifierRegistry
    /// @dev The penalty taken is at most `amount` and at most the stake left beside its audit deposits: seats are
    /// drawn whatever is locked, so a verifier's locks may exceed its stake, and its penalties together never
    /// exceed it, nor reach the deposit an audit it opened holds.
    function releaseSeat(address account, uint256 amount, uint256 penalty)
        external
        onlyRole(ARBITER_ROLE)
        returns (uint256 taken)
    {
        taken = _release(account, amount, Math.min(penalty, _verifiers[account].stake - _deposits[account]));
    }

    /// @inheritdoc IVerifierRegistry
    function releaseDeposit(address account, uint256 amount, uint256 penalty)
        external
        onlyRole(ARBITER_ROLE)
        returns (uint256 taken)
    {
        _deposits[account] -= amount;
        taken = _release(account, amount, penalty);
    }

    // ------------------------------------------------------------------------------------------------ admin

    /// @notice Sets the minimum stake (the seat unit) for registrations from now on.
    function setMinStake(uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMinStake(amount);
    }

    /// @notice Sets the unbonding period for exit requests from now on.
    function setUnbondingPeriod(uint256 period) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setUnbondingPeriod(period);
    }

    // ------------------------------------------------------------------------------------------------ views

    /// @inheritdoc IVerifierRegistry
    function minStakeAt(uint256 time) external view returns (uint256) {
        return _minStakes[Versions.at(_minStakeSince, time)];
    }

    /// @inheritdoc IVerifierRegistry
    function verifierOf(address account) external view returns (Verifier memory) {
        return _verifiers[account];
    }

    /// @inheritdoc IVerifierRegistry
    function isVerifier(address account) external view returns (bool) {
        Verifier storage verifier = _verifiers[account];
        return verifier.stake != 0 && verifier.exitAtBlock == 0;
    }

    /// @inheritdoc IVerifierRegistry
    function judges(address account, bytes32 model) external view returns (bool) {
        Verifier storage verifier = _verifiers[account];
        uint256 entry = _entryPlusOne[model][account];
        return verifier.stake != 0 && verifier.exitAtBlock == 0 && entry != 0
            && _pools[model].weightAt(entry - 1, block.number) != 0;
    }

    /// @inheritdoc IVerifierRegistry
    function modelsOf(address account) external view returns (bytes32[] memory) {
        return _models[account];
    }

    /// @inheritdoc IVerifierRegistry
    function needsReweigh(address account) external view returns (bool) {
        uint256 stake = _verifiers[account].stake;
        bytes32[] storage models = _models[account];
        for (uint256 i = 0; i < models.length; ++i) {
            bytes32 model = models[i];
            if (stake >= _backing[model][account].latest()) continue;
            if (_pools[model].weightAt(_entryPlusOne[model][account] - 1, block.number) != 0) return true;
        }
        return false;
    }

    /// @inheritdoc IVerifierRegistry
    function totalWeight(bytes32 model) external view returns (uint256) {
        return _pools[model].totalAt(block.number);
    }

    /// @dev Puts an active verifier into `model`'s pool with its stake in whole seats of the minimum stake now
    /// (in its old place if it was there before).
    function _join(address account, Verifier storage verifier, bytes32 model) private {
        if (model == 0) revert ZeroModel();
        uint256 count = _models[account].length;
        if (count == MAX_MODELS) revert TooManyModels(count + 1, MAX_MODELS);
        for (uint256 i = 0; i < count; ++i) {
            if (_models[account][i] == model) revert AlreadyJudgingModel(account, model);
        }
        _models[account].push(model);
        uint256 weight = verifier.stake / minStake;
        if (weight == 0) revert VerifierStakeTooLow(verifier.stake, minStake);
        _backing[model][account].push(uint48(block.number), uint208(verifier.stake));
        Sortition.Pool storage pool = _pools[model];
        uint256 entry = _entryPlusOne[model][account];
        if (entry == 0) _entryPlusOne[model][account] = pool.append(account, weight) + 1;
        else pool.reweigh(entry - 1, weight);
        emit VerifierModelAdded(account, model, weight);
    }

    /// @dev A round's draw: the sortition as it stood at the end of block `atBlock` (the round's opening) but the
    /// parties' registrations, whose ranges are cut out of the number line (kept sorted by start) so that they
    /// take no draws.
    function _drawWithout(bytes32 model, address[] calldata parties, uint256 atBlock, uint256 seatStake)
        private
        view
        returns (Draw memory draw)
    {
        (draw.model, draw.atBlock, draw.seatStake) = (model, atBlock, seatStake);
        Sortition.Pool storage pool = _pools[model];
        mapping(address => uint256) storage entryPlusOne = _entryPlusOne[model];
        draw.cutStarts = new uint256[](parties.length);
        draw.cutWeights = new uint256[](parties.length);
        uint256 excluded;
        for (uint256 i = 0; i < parties.length; ++i) {
            uint256 entry = entryPlusOne[parties[i]];
            if (entry == 0) continue;
            (uint256 start, uint256 weight) = pool.rangeAt(entry - 1, atBlock);
            if (weight == 0 || _isCut(draw, start)) continue;
            uint256 j = draw.cuts++;
            while (j > 0 && draw.cutStarts[j - 1] > start) {
                (draw.cutStarts[j], draw.cutWeights[j]) = (draw.cutStarts[j - 1], draw.cutWeights[j - 1]);
                --j;
            }
            (draw.cutStarts[j], draw.cutWeights[j]) = (start, weight);
            excluded += weight;
        }
        draw.weight = pool.totalAt(atBlock) - excluded;
    }

    /// @dev Whether a range starting at `start` is cut already (a party named twice).
    function _isCut(Draw memory draw, uint256 start) private pure returns (bool) {
        for (uint256 i = 0; i < draw.cuts; ++i) {
            if (draw.cutStarts[i] == start) return true;
        }
        return false;
    }

    /// @dev The verifier one draw seats, its seat stake locked; address(0) when the draw is lost. `number` lands
    /// on a registration with probability weight / draw weight (past the parties' ranges); the landing counts with
    /// probability stake / the stake its weight was weighed with, both as they stood when the round opened (the
    /// rest of `number`'s bits decide), so penalties taken before then lower its chance in proportion: weight
    /// follows stake. Nothing that happens after the opening is read, so no later call (another round's draw, a
    /// resolve that takes penalties, a model left and joined again) changes the jury; seats locked elsewhere steer
    /// none. A verifier may so hold more seats at once than its free stake covers; its penalties are capped at
    /// its stake (`releaseSeat`).
    function _lands(uint256 number, Draw memory draw) private returns (address) {
        Sortition.Pool storage pool = _pools[draw.model];
        uint256 point = number % draw.weight;
        for (uint256 i = 0; i < draw.cuts && draw.cutStarts[i] <= point; ++i) {
            point += draw.cutWeights[i];
        }
        // A registration that left the pool by the round's opening has no weight in it: it is never selected here.
        address account = pool.accounts[pool.select(point, draw.atBlock)];
        uint48 opened = uint48(draw.atBlock);
        uint256 weighed = _backing[draw.model][account].upperLookupRecent(opened);
        uint256 stake = _stakes[account].upperLookupRecent(opened);
        if (stake < weighed && (number / draw.weight) % weighed >= stake) return address(0);
        _verifiers[account].locked += draw.seatStake.toUint128();
        emit SeatLocked(account, draw.seatStake);
        return account;
    }

    /// @dev Unlocks `amount` of `account`'s stake and takes `penalty` of it (at most `amount`) to the escrow.
    function _release(address account, uint256 amount, uint256 penalty) private returns (uint256 taken) {
        Verifier storage verifier = _verifiers[account];
        verifier.locked -= amount.toUint128();
        taken = Math.min(penalty, amount);
        if (taken != 0) {
            verifier.stake -= taken.toUint128();
            _recordStake(account, verifier.stake);
            token.safeTransfer(penaltySink, taken);
        }
        emit SeatReleased(account, amount, taken);
    }

    function _recordStake(address account, uint256 stake) private {
        _stakes[account].push(uint48(block.number), uint208(stake));
    }

    function _setMinStake(uint256 amount) private {
        if (amount == 0) revert ZeroAmount();
        minStake = amount;
        // From the next second on: a task created in this very block keeps the previous seat stake.
        _minStakes.push(amount);
        _minStakeSince.push(_minStakes.length == 1 ? 0 : (block.timestamp + 1).toUint64());
        emit MinStakeChanged(amount);
    }

    function _setUnbondingPeriod(uint256 period) private {
        if (period > MAX_UNBONDING) revert UnbondingTooLong(period, MAX_UNBONDING);
        if (period < MIN_UNBONDING) revert UnbondingTooShort(period, MIN_UNBONDING);
        unbondingPeriod = period;
        emit UnbondingPeriodChanged(period);
    }
}
