// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {TaskRegistry} from "../src/TaskRegistry.sol";
import {IGPURegistry} from "../src/interfaces/IGPURegistry.sol";
import {IPaymentEscrow} from "../src/interfaces/IPaymentEscrow.sol";
import {ITaskRegistry} from "../src/interfaces/ITaskRegistry.sol";
import {ResultLeaf} from "../src/libraries/ResultLeaf.sol";
import {PositionalMerkle} from "../src/libraries/PositionalMerkle.sol";

/// @notice The registry's commitment digest for a task it does not store (the vectors' request count and miners).
contract DigestRegistry is TaskRegistry {
    constructor(IGPURegistry gpuRegistry_, IPaymentEscrow escrow_, address admin, Config memory config)
        TaskRegistry(gpuRegistry_, escrow_, admin, config)
    {}

    function commitmentDigestFor(
        uint256 taskId,
        uint32 requestCount,
        address[] calldata assigned,
        Commitment calldata c,
        address miner
    ) external view returns (bytes32) {
        return _commitmentDigest(taskId, requestCount, keccak256(abi.encodePacked(assigned)), c, miner);
    }
}

/// @notice The contracts' own library code, reached with calldata arguments as the contracts reach it.
contract ProtocolHarness {
    function leafHash(ResultLeaf.Leaf calldata leaf) external pure returns (bytes32) {
        return ResultLeaf.hash(leaf);
    }

    function rootOf(bytes32[] calldata proof, ResultLeaf.Leaf calldata leaf, uint256 index, uint256 count)
        external
        pure
        returns (bytes32, uint64, uint64)
    {
        return PositionalMerkle.rootOf(
            proof, ResultLeaf.hash(leaf), leaf.inputTokens, leaf.outputTokens, index, count
        );
    }

    function inServedTree(bytes32[] calldata proof, bytes32 root, bytes32 leaf) external pure returns (bool) {
        return MerkleProof.verifyCalldata(proof, root, leaf);
    }
}

/// @notice The test vectors that Python builds (tests/protocol_vectors.py) computed again by the contracts: leaf
/// hashes, positional results sum-tree proofs (valid at their own position only, yielding the committed usage), served proofs and the EIP-712 digests
/// miners sign (each one's commitment, and an acceptance of a task). pytest checks the same file against Python, so the two encodings cannot drift apart.
contract ProtocolVectorsTest is Test {
    string internal json;
    ProtocolHarness internal harness;

    function setUp() public {
        json = vm.readFile("contracts/test/vectors/protocol.json");
        harness = new ProtocolHarness();
    }

    function _leafPath(uint256 i, string memory field) internal pure returns (string memory) {
        return string.concat(".leaves[", vm.toString(i), "].", field);
    }

    function _leaf(uint256 i) internal view returns (ResultLeaf.Leaf memory) {
        return ResultLeaf.Leaf({
            taskId: vm.parseJsonUint(json, ".taskId"),
            requestIndex: uint32(vm.parseJsonUint(json, _leafPath(i, "requestIndex"))),
            customIdHash: vm.parseJsonBytes32(json, _leafPath(i, "customIdHash")),
            inputHash: vm.parseJsonBytes32(json, _leafPath(i, "inputHash")),
            outputHash: vm.parseJsonBytes32(json, _leafPath(i, "outputHash")),
            inputTokens: uint32(vm.parseJsonUint(json, _leafPath(i, "inputTokens"))),
            outputTokens: uint32(vm.parseJsonUint(json, _leafPath(i, "outputTokens"))),
            pipeline: vm.parseJsonAddressArray(json, _leafPath(i, "pipeline"))
        });
    }

    function _count() internal view returns (uint256) {
        return vm.parseJsonUint(json, ".requestCount");
    }

    function test_vectors_leafHashes() public view {
        for (uint256 i = 0; i < _count(); ++i) {
            assertEq(harness.leafHash(_leaf(i)), vm.parseJsonBytes32(json, _leafPath(i, "hash")));
        }
    }

    function test_vectors_inputLeaves() public view {
        for (uint256 i = 0; i < _count(); ++i) {
            ResultLeaf.Leaf memory leaf = _leaf(i);
            bytes32 expected =
                keccak256(bytes.concat(keccak256(abi.encode(uint32(i), leaf.customIdHash, leaf.inputHash))));
            assertEq(expected, vm.parseJsonBytes32(json, _leafPath(i, "inputLeaf")));
        }
    }

    /// @dev Each leaf's proof in the results sum tree holds at its own position only and yields the usage the
    /// commitment states.
    function test_vectors_positionalProofsHoldAtTheirPositionOnly() public view {
        bytes32 root = vm.parseJsonBytes32(json, ".resultsRoot");
        uint256 inputTokens = vm.parseJsonUint(json, ".commitment.inputTokens");
        uint256 outputTokens = vm.parseJsonUint(json, ".commitment.outputTokens");
        uint256 count = _count();
        for (uint256 i = 0; i < count; ++i) {
            bytes32[] memory proof = vm.parseJsonBytes32Array(json, _leafPath(i, "proof"));
            for (uint256 at = 0; at <= count; ++at) {
                (bytes32 r, uint64 totalInput, uint64 totalOutput) =
                    harness.rootOf(proof, _leaf(i), at, count);
                assertEq(r == root, at == i, "position");
                if (at == i) {
                    assertEq(abi.encode(totalInput, totalOutput), abi.encode(inputTokens, outputTokens));
                }
            }
        }
    }

    function test_vectors_servedProofs() public view {
        address[] memory miners = vm.parseJsonAddressArray(json, ".miners");
        bytes32[] memory served = vm.parseJsonBytes32Array(json, ".servedRoots");
        for (uint256 i = 0; i < _count(); ++i) {
            ResultLeaf.Leaf memory leaf = _leaf(i);
            bytes32 leafHash = vm.parseJsonBytes32(json, _leafPath(i, "hash"));
            for (uint256 k = 0; k < leaf.pipeline.length; ++k) {
                string memory path = string.concat(_leafPath(i, "servedProofs"), "[", vm.toString(k), "]");
                bytes32[] memory proof = vm.parseJsonBytes32Array(json, path);
                uint256 m;
                while (miners[m] != leaf.pipeline[k]) ++m;
                assertTrue(harness.inServedTree(proof, served[m], leafHash));
            }
        }
        assertEq(served[2], bytes32(0), "a miner that served nothing");
    }

    /// @dev A TaskRegistry at the vectors' verifying contract, on the vectors' chain.
    function _registry() internal returns (DigestRegistry) {
        address at = vm.parseJsonAddress(json, ".commitment.verifyingContract");
        ITaskRegistry.Config memory config = ITaskRegistry.Config({
            challengeWindow: 1 days,
            coordinatorFeeBps: 0,
            feeRecipient: address(1),
            minStakeLock: 0,
            maxValueAtRisk: 1
        });
        deployCodeTo(
            "ProtocolVectors.t.sol:DigestRegistry",
            abi.encode(IGPURegistry(address(1)), IPaymentEscrow(address(2)), address(3), config),
            at
        );
        vm.chainId(vm.parseJsonUint(json, ".commitment.chainId"));
        return DigestRegistry(at);
    }

    /// @dev Each miner's commitment digest.
    function test_vectors_commitmentDigests() public {
        DigestRegistry registry = _registry();
        bytes32[] memory served = vm.parseJsonBytes32Array(json, ".servedRoots");
        ITaskRegistry.Commitment memory c = ITaskRegistry.Commitment({
            resultsRoot: vm.parseJsonBytes32(json, ".resultsRoot"),
            inputTokens: uint64(vm.parseJsonUint(json, ".commitment.inputTokens")),
            outputTokens: uint64(vm.parseJsonUint(json, ".commitment.outputTokens")),
            payment: uint128(vm.parseJsonUint(json, ".commitment.payment")),
            minerAmounts: vm.parseJsonUintArray(json, ".commitment.minerAmounts"),
            servedRoots: served
        });
        bytes32[] memory digests = vm.parseJsonBytes32Array(json, ".commitment.digests");
        address[] memory assigned = vm.parseJsonAddressArray(json, ".miners");
        uint256 taskId = vm.parseJsonUint(json, ".taskId");
        uint32 count = uint32(vm.parseJsonUint(json, ".requestCount"));
        for (uint256 i = 0; i < assigned.length; ++i) {
            assertEq(registry.commitmentDigestFor(taskId, count, assigned, c, assigned[i]), digests[i]);
        }
    }

    /// @dev A miner's acceptance of the task's stake lock.
    function test_vectors_acceptanceDigest() public {
        TaskRegistry registry = _registry();
        assertEq(
            registry.acceptanceDigest(
                vm.parseJsonUint(json, ".taskId"),
                vm.parseJsonAddress(json, ".acceptance.miner"),
                uint128(vm.parseJsonUint(json, ".acceptance.stakeLock")),
                uint64(vm.parseJsonUint(json, ".acceptance.expiry"))
            ),
            vm.parseJsonBytes32(json, ".acceptance.digest")
        );
    }
}
