// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice Minimal RLP block headers for tests: twelve empty fields, the extra data, then the mix hash (the field
/// `BlockHeader.mixHashOf` reads), where a real header has them.
library Headers {
    /// @dev A header with empty extra data and the 32-byte `mixHash`.
    function withMixHash(bytes32 mixHash) internal pure returns (bytes memory) {
        return withExtraData("", mixHash);
    }

    /// @dev A header with `extraData` (at most 55 bytes: what a block's builder chooses freely) and `mixHash`.
    function withExtraData(bytes memory extraData, bytes32 mixHash)
        internal
        pure
        returns (bytes memory header)
    {
        require(extraData.length <= 55, "short extra data only");
        bytes memory payload = new bytes(12);
        for (uint256 i = 0; i < 12; ++i) {
            payload[i] = 0x80;
        }
        payload =
            bytes.concat(payload, bytes1(uint8(0x80 + extraData.length)), extraData, bytes1(0xa0), mixHash);
        header = payload.length <= 55
            ? bytes.concat(bytes1(uint8(0xc0 + payload.length)), payload)
            : bytes.concat(bytes1(0xf8), bytes1(uint8(payload.length)), payload);
    }
}
