// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title BlockHeader
/// @notice Reads the `mixHash` field (since the merge: `prevRandao`, the beacon chain's RANDAO mix the block was
/// built on) out of an RLP-encoded Ethereum block header. The header is a list of byte strings whose 14th is the
/// mix hash; the fields after it (nonce, base fee, withdrawals root, blob gas, beacon root, requests hash, and
/// whatever later forks add) are not read, so every fork's header parses.
library BlockHeader {
    /// @notice Index of the mix hash among the header's fields.
    uint256 internal constant MIX_HASH_FIELD = 13;

    error MalformedHeader();

    /// @notice The mix hash of `header`; reverts `MalformedHeader` unless `header` is one RLP list that holds
    /// at least 14 byte strings, the 14th exactly 32 bytes long.
    function mixHashOf(bytes calldata header) internal pure returns (bytes32 mixHash) {
        (uint256 offset, uint256 end) = _listPayload(header);
        for (uint256 i = 0; i < MIX_HASH_FIELD; ++i) {
            (,, uint256 next) = _string(header, offset, end);
            offset = next;
        }
        (uint256 start, uint256 size,) = _string(header, offset, end);
        if (size != 32) revert MalformedHeader();
        mixHash = bytes32(header[start:start + 32]);
    }

    /// @dev Where the outer list's payload starts and ends; it must end exactly where the header does.
    function _listPayload(bytes calldata header) private pure returns (uint256 start, uint256 end) {
        if (header.length == 0) revert MalformedHeader();
        uint8 prefix = uint8(header[0]);
        if (prefix < 0xc0) revert MalformedHeader();
        uint256 length;
        if (prefix <= 0xf7) {
            (start, length) = (1, prefix - 0xc0);
        } else {
            uint256 lengthOfLength = prefix - 0xf7;
            length = _bigEndian(header, 1, lengthOfLength);
            start = 1 + lengthOfLength;
        }
        end = start + length;
        if (end != header.length) revert MalformedHeader();
    }

    /// @dev The byte string at `offset`: where its content starts, its length, and where the next item starts.
    /// A nested list, or an item running past `end`, is malformed.
    function _string(bytes calldata header, uint256 offset, uint256 end)
        private
        pure
        returns (uint256 start, uint256 length, uint256 next)
    {
        if (offset >= end) revert MalformedHeader();
        uint8 prefix = uint8(header[offset]);
        if (prefix < 0x80) {
            (start, length) = (offset, 1);
        } else if (prefix <= 0xb7) {
            (start, length) = (offset + 1, prefix - 0x80);
        } else if (prefix <= 0xbf) {
            uint256 lengthOfLength = prefix - 0xb7;
            if (offset + 1 + lengthOfLength > end) revert MalformedHeader();
            length = _bigEndian(header, offset + 1, lengthOfLength);
            start = offset + 1 + lengthOfLength;
        } else {
            revert MalformedHeader();
        }
        next = start + length;
        if (next > end) revert MalformedHeader();
    }

    /// @dev The `size`-byte big-endian number at `offset` (a length: at most 8 bytes, which no header reaches).
    function _bigEndian(bytes calldata data, uint256 offset, uint256 size)
        private
        pure
        returns (uint256 value)
    {
        if (size > 8 || offset + size > data.length) revert MalformedHeader();
        for (uint256 i = 0; i < size; ++i) {
            value = value << 8 | uint8(data[offset + i]);
        }
    }
}
