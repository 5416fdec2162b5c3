// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {BlockRandomness} from "../src/BlockRandomness.sol";
import {BlockHeader} from "../src/libraries/BlockHeader.sol";
import {Headers} from "./utils/Headers.sol";

/// @notice The randomness juries and audits draw from: `prevrandao` of a past block, proven from its header.
contract BlockRandomnessTest is Test {
    /// @dev A real header: block 2 of an anvil devnet (Prague: 21 fields, 610 bytes), its hash and mix hash.
    bytes internal constant ANVIL_HEADER = hex"f9025fa01aceba628aa85b4559aeefb796dd3a46509782f3444842cb5a7b3dbfcf147218a01dcc4de8dec75d7aab85b5"
        hex"67b6ccd41ad312451b948a7413f0a142fd40d49347940000000000000000000000000000000000000000a05b90127962"
        hex"5061dd44c708ab17c521a9fff121aa32eb4c6b24de86cbc73931f2a056e81f171bcc55a6ff8345e692c0f86e5b48e01b"
        hex"996cadc001622fb5e363b421a056e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421b90100"
        hex"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        hex"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        hex"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        hex"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        hex"000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        hex"0000000000000000000000000000000080028401c9c38080846b0af6f280a09bc8a694070f3300e6cc80b691ecf7c0f4"
        hex"5dced5326871a1a02eb28769125d4088000000000000000084342770c0a056e81f171bcc55a6ff8345e692c0f86e5b48"
        hex"e01b996cadc001622fb5e363b4218080a000000000000000000000000000000000000000000000000000000000000000"
        hex"00a0e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    bytes32 internal constant ANVIL_HASH = 0x764c381fa0fc60daa0cc73baef8b62e02af4bd30c60b4857835e6b85e846a17b;
    bytes32 internal constant ANVIL_MIX_HASH =
        0x9bc8a694070f3300e6cc80b691ecf7c0f45dced5326871a1a02eb28769125d40;

    BlockRandomness internal randomness = new BlockRandomness();

    function setUp() public {
        vm.roll(100);
    }

    function test_aRealHeader_provesItsMixHash() public {
        vm.setBlockhash(90, ANVIL_HASH);
        vm.expectEmit(address(randomness));
        emit BlockRandomness.RandomnessProven(90, ANVIL_MIX_HASH);
        assertEq(randomness.prove(90, ANVIL_HEADER), ANVIL_MIX_HASH);
        assertEq(randomness.valueOf(90), ANVIL_MIX_HASH);
        assertFalse(randomness.isExpired(90));
        vm.roll(90 + 257);
        assertEq(randomness.valueOf(90), ANVIL_MIX_HASH, "kept for good once proven");
        assertFalse(randomness.isExpired(90));
    }

    /// @dev Only the block's own header: another header (another mix hash, or the same one with other extra
    /// data) does not hash to the block's hash; the current block, a future one and one whose hash is gone have
    /// no header to prove.
    function test_onlyTheBlocksHeaderProves() public {
        bytes memory header = Headers.withExtraData("builder's choice", keccak256("mix"));
        vm.setBlockhash(90, keccak256(header));
        bytes memory other = Headers.withExtraData("another choice", keccak256("mix"));
        vm.expectRevert(
            abi.encodeWithSelector(
                BlockRandomness.HeaderMismatch.selector, 90, keccak256(header), keccak256(other)
            )
        );
        randomness.prove(90, other);
        for (uint256 n = 100; n < 102; ++n) {
            vm.expectRevert(abi.encodeWithSelector(BlockRandomness.HeaderUnavailable.selector, n));
            randomness.prove(n, header);
        }
        vm.roll(90 + 257);
        assertTrue(randomness.isExpired(90), "never proven, and its hash is gone");
        vm.expectRevert(abi.encodeWithSelector(BlockRandomness.HeaderUnavailable.selector, 90));
        randomness.prove(90, header);
    }

    /// @dev Proving again changes nothing (and needs no header); a header without randomness, or too long, is
    /// refused.
    function test_refusalsAndRepeats() public {
        bytes memory header = Headers.withMixHash(keccak256("mix"));
        vm.setBlockhash(90, keccak256(header));
        randomness.prove(90, header);
        assertEq(randomness.prove(90, ""), keccak256("mix"));
        bytes memory empty = Headers.withMixHash(bytes32(0));
        vm.setBlockhash(91, keccak256(empty));
        vm.expectRevert(abi.encodeWithSelector(BlockRandomness.NoRandomness.selector, 91));
        randomness.prove(91, empty);
        bytes memory long = new bytes(2049);
        vm.expectRevert(abi.encodeWithSelector(BlockRandomness.HeaderTooLong.selector, 2049, 2048));
        randomness.prove(92, long);
    }

    /// @dev Whatever bytes are sent as a header: the parse never reads past them and either finds the 14th
    /// field (32 bytes) or reverts MalformedHeader, never anything else.
    function testFuzz_anyBytesParseOrAreRefused(bytes calldata junk) public {
        try this.mixHashOf(junk) returns (bytes32) {}
        catch (bytes memory reason) {
            assertEq(bytes4(reason), BlockHeader.MalformedHeader.selector);
        }
    }

    /// @dev Cut short, a real header is malformed at every length.
    function test_aTruncatedHeaderIsMalformed() public {
        for (uint256 cut = 1; cut < ANVIL_HEADER.length; cut += 37) {
            bytes memory truncated = this.prefix(ANVIL_HEADER, ANVIL_HEADER.length - cut);
            vm.expectRevert(BlockHeader.MalformedHeader.selector);
            this.mixHashOf(truncated);
        }
    }

    function mixHashOf(bytes calldata header) external pure returns (bytes32) {
        return BlockHeader.mixHashOf(header);
    }

    function prefix(bytes calldata data, uint256 length) external pure returns (bytes memory) {
        return data[:length];
    }
}
