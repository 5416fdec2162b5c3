// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {ITaskRegistry} from "../../src/interfaces/ITaskRegistry.sol";

/// @notice Miners' consent to a task's stake lock, signed with their registered signers' keys.
abstract contract Consent is Test {
    /// @dev The private key of `miner`'s registered signer.
    function _keyOf(address miner) internal view virtual returns (uint256);

    /// @dev The EIP-712 digest of `AcceptTask`, computed from the spec (no call to the registry, so a pending
    /// prank is kept for the assignment itself).
    function _acceptanceDigest(address registry, uint256 taskId, address miner, uint128 lock, uint64 expiry)
        internal
        view
        returns (bytes32)
    {
        bytes32 domain = keccak256(
            abi.encode(
                keccak256(
                    "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
                ),
                keccak256("BatchMarket TaskRegistry"),
                keccak256("1"),
                block.chainid,
                registry
            )
        );
        bytes32 typeHash =
            keccak256("AcceptTask(uint256 taskId,address miner,uint128 stakeLock,uint64 expiry)");
        bytes32 structHash = keccak256(abi.encode(typeHash, taskId, miner, lock, expiry));
        return keccak256(abi.encodePacked("\x19\x01", domain, structHash));
    }

    /// @dev Every miner of `list` accepts task `taskId` with a lock of `lock`, for an hour from now.
    function _acceptances(ITaskRegistry registry, uint256 taskId, address[] memory list, uint128 lock)
        internal
        view
        returns (ITaskRegistry.Acceptance[] memory accepted)
    {
        uint64 expiry = uint64(block.timestamp + 1 hours);
        accepted = new ITaskRegistry.Acceptance[](list.length);
        for (uint256 i = 0; i < list.length; ++i) {
            bytes32 digest = _acceptanceDigest(address(registry), taskId, list[i], lock, expiry);
            (uint8 v, bytes32 r, bytes32 s) = vm.sign(_keyOf(list[i]), digest);
            accepted[i] = ITaskRegistry.Acceptance(expiry, abi.encodePacked(r, s, v));
        }
    }
}
