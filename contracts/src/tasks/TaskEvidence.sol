// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {ITaskRegistry} from "../interfaces/ITaskRegistry.sol";
import {AddressList} from "../libraries/AddressList.sol";
import {PositionalMerkle} from "../libraries/PositionalMerkle.sol";
import {ResultLeaf} from "../libraries/ResultLeaf.sol";
import {TaskRecords} from "./TaskRecords.sol";

/// @title TaskEvidence
/// @notice What proves what about a task: the EIP-712 messages miners sign (consent to a task's stake lock, and
/// the result commitment with the root of the lines each served itself), and the proofs that put one result
/// leaf at its position in the committed tree and name the miners accountable for it.
abstract contract TaskEvidence is TaskRecords, EIP712 {
    using AddressList for address[];

    /// @notice EIP-712 type of the message every assigned miner signs before results are committed: it names the
    /// task's request count, its assigned miners in order and the signing miner, and covers every miner's served
    /// root, so a signer vouches for exactly the commitment it checked (a coordinator cannot show it another
    /// miner order or request count, and no co-signer can swap in a served root afterwards).
    bytes32 public constant RESULT_COMMITMENT_TYPEHASH = keccak256(
        "ResultCommitment(uint256 taskId,uint32 requestCount,address[] miners,address miner,bytes32 resultsRoot,uint64 inputTokens,uint64 outputTokens,uint128 payment,uint256[] minerAmounts,bytes32[] servedRoots)"
    );

    /// @notice EIP-712 type of a miner's consent to one task's stake lock; it names the miner, so one signer's
    /// consent never counts for another miner that points its signer at the same key.
    bytes32 public constant ACCEPT_TASK_TYPEHASH =
        keccak256("AcceptTask(uint256 taskId,address miner,uint128 stakeLock,uint64 expiry)");

    /// @notice Longest Merkle proof accepted (a tree of 2^64 leaves).
    uint256 public constant MAX_PROOF_LENGTH = 64;

    constructor() EIP712("BatchMarket TaskRegistry", "1") {}

    /// @inheritdoc ITaskRegistry
    function acceptanceDigest(uint256 taskId, address miner, uint128 stakeLock, uint64 expiry)
        public
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(keccak256(abi.encode(ACCEPT_TASK_TYPEHASH, taskId, miner, stakeLock, expiry)));
    }

    /// @inheritdoc ITaskRegistry
    function commitmentDigest(uint256 taskId, Commitment calldata c, address miner)
        public
        view
        returns (bytes32)
    {
        return _commitmentDigest(taskId, _tasks[taskId].requestCount, _minersHash(taskId), c, miner);
    }

    /// @dev The EIP-712 encoding of a task's `address[] miners`: the hash of each address as a 32-byte word.
    function _minersHash(uint256 taskId) internal view returns (bytes32) {
        return keccak256(abi.encodePacked(_miners[taskId]));
    }

    /// @dev The digest for a task of `requestCount` requests whose assigned miners hash to `minersHash`; encoded
    /// in two parts only to stay within the stack (the same bytes as one `abi.encode`).
    function _commitmentDigest(
        uint256 taskId,
        uint32 requestCount,
        bytes32 minersHash,
        Commitment calldata c,
        address miner
    ) internal view returns (bytes32) {
        bytes memory head = abi.encode(RESULT_COMMITMENT_TYPEHASH, taskId, requestCount, minersHash, miner);
        bytes memory tail = abi.encode(
            c.resultsRoot,
            c.inputTokens,
            c.outputTokens,
            c.payment,
            keccak256(abi.encodePacked(c.minerAmounts)),
            keccak256(abi.encodePacked(c.servedRoots))
        );
        return _hashTypedDataV4(keccak256(bytes.concat(head, tail)));
    }

    /// @inheritdoc ITaskRegistry
    /// @dev A pipeline entry that is not an assigned miner, has no served root, repeats an earlier entry or whose
    /// served proof fails is left out: the coordinator writes pipelines, and only a miner's own signature binds it.
    function accountableFor(
        uint256 taskId,
        ResultLeaf.Leaf calldata leaf,
        bytes32[] calldata proof,
        bytes32[][] calldata servedProofs
    ) external view returns (bytes32 leafHash, address[] memory accountable) {
        Task storage task = _tasks[taskId];
        leafHash = ResultLeaf.hash(leaf);
        (bytes32 root,,) = _resultsRootOf(taskId, task, leaf, leafHash, proof);
        if (task.resultsRoot == bytes32(0) || root != task.resultsRoot) revert InvalidProof();
        uint256 length = leaf.pipeline.length;
        if (length > MAX_MINERS_PER_TASK) revert PipelineTooLong(length, MAX_MINERS_PER_TASK);
        if (servedProofs.length != length) revert LengthMismatch(length, servedProofs.length);

        address[] storage miners = _miners[taskId];
        bytes32[] storage served = _servedRoots[taskId];
        accountable = new address[](length);
        uint256 found;
        for (uint256 k = 0; k < length; ++k) {
            _checkProofLength(servedProofs[k].length);
            address miner = leaf.pipeline[k];
            for (uint256 i = 0; i < miners.length; ++i) {
                if (miners[i] != miner) continue;
                bytes32 servedRoot = served[i];
                if (
                    servedRoot != bytes32(0) && !accountable.contains(miner)
                        && MerkleProof.verifyCalldata(servedProofs[k], servedRoot, leafHash)
                ) accountable[found++] = miner;
                break;
            }
        }
        if (found == 0) revert NoAccountableMiner(taskId, leaf.requestIndex);
        assembly ("memory-safe") {
            mstore(accountable, found)
        }
    }

    /// @dev The miner's registered signer must have accepted exactly this task and lock, and not too long ago;
    /// returns that signer, which the task keeps as the miner's for its whole life.
    function _checkConsent(uint256 taskId, address miner, uint128 stakeLock, Acceptance calldata a)
        internal
        view
        returns (address signer)
    {
        if (block.timestamp > a.expiry) revert AcceptanceExpired(miner, a.expiry);
        bytes32 digest = acceptanceDigest(taskId, miner, stakeLock, a.expiry);
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, a.signature);
        signer = gpuRegistry.signerOf(miner);
        if (err != ECDSA.RecoverError.NoError || recovered != signer) revert NoConsent(miner, recovered);
    }

    /// @dev Every assigned miner's signer (the one it accepted the task with) must have signed exactly this
    /// commitment naming that miner, or the miner vouched for exactly that on-chain (`vouchResults`),
    /// except that an empty signature stands for a miner that is paid nothing and vouches for nothing (a spare
    /// that served no line, or a miner gone for good whose lines were served again by others), and never for a
    /// miner that vouched on-chain for other results. A revoked signer's signature is refused (its miner's
    /// account may vouch instead). At least one miner must sign: no commitment stands on the
    /// coordinator's word alone. Returns who signed (bit i: miner i).
    function _checkSignatures(uint256 taskId, Commitment calldata c, bytes[] calldata signatures)
        internal
        view
        returns (uint256 signed)
    {
        address[] storage miners = _miners[taskId];
        uint256 count = miners.length;
        if (signatures.length != count) revert LengthMismatch(count, signatures.length);
        bytes32[] storage vouches = _vouches[taskId];
        uint32 requestCount = _tasks[taskId].requestCount;
        bytes32 minersHash = _minersHash(taskId);
        uint256 revoked = _revokedMask[taskId];
        for (uint256 i = 0; i < count; ++i) {
            bytes32 digest = _commitmentDigest(taskId, requestCount, minersHash, c, miners[i]);
            if (signatures[i].length == 0) {
                bytes32 vouch = vouches.length != 0 ? vouches[i] : bytes32(0);
                if (vouch == digest) {
                    signed |= 1 << i;
                } else if (vouch != 0) {
                    revert VouchedOtherResults(miners[i]); // a miner that vouched is never left out
                } else if (c.minerAmounts[i] != 0 || c.servedRoots[i] != bytes32(0)) {
                    revert UnpaidShareRequired(miners[i]);
                }
                continue;
            }
            signed |= 1 << i;
            address expected = _signers[taskId][i];
            if ((revoked >> i) & 1 == 1) revert SignerRevoked(taskId, expected);
            (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, signatures[i]);
            if (err != ECDSA.RecoverError.NoError || recovered != expected) {
                revert InvalidSignature(miners[i], recovered);
            }
        }
        if (signed == 0) revert NoMinerSigned(taskId);
    }

    /// @dev The results root and total usage that `leaf` at its position and `proof` imply (zero if they do not
    /// fit the task's tree); a results proof holds two words per level.
    function _resultsRootOf(
        uint256 taskId,
        Task storage task,
        ResultLeaf.Leaf calldata leaf,
        bytes32 leafHash,
        bytes32[] calldata proof
    ) internal view returns (bytes32, uint64, uint64) {
        if (leaf.taskId != taskId) revert LeafTaskMismatch(taskId, leaf.taskId);
        _checkProofLength(proof.length / 2);
        return PositionalMerkle.rootOf(
            proof, leafHash, leaf.inputTokens, leaf.outputTokens, leaf.requestIndex, task.requestCount
        );
    }

    function _checkProofLength(uint256 length) private pure {
        if (length > MAX_PROOF_LENGTH) revert ProofTooLong(length, MAX_PROOF_LENGTH);
    }
}
