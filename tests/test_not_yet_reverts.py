"""A contract error that means "not yet" says when the call becomes possible and how a devnet gets there; any
other error reads as before."""

from __future__ import annotations

from eth_abi.abi import encode
from eth_utils.abi import function_signature_to_4byte_selector

from client_sdk.chain.reverts import decode_revert


def revert_data(signature: str, types: list[str], values: list[int]) -> bytes:
    return function_signature_to_4byte_selector(signature) + encode(types, values)


def test_a_jury_not_drawable_yet_names_its_block_and_how_a_devnet_mines_it() -> None:
    error = decode_revert(revert_data("JuryNotDrawable(uint256,uint256)", ["uint256"] * 2, [1, 56]))
    assert error.error_name == "JuryNotDrawable"
    assert str(error) == (
        "the contract rejected the call: JuryNotDrawable(disputeId=1, readyAtBlock=56); not yet: possible "
        "once the chain has mined block 56 (a local anvil that mines only on transactions: run it with "
        "--block-time 1, or `cast rpc anvil_mine 10`; docs/coordinator.md#devnet-recipes)"
    )


def test_an_open_challenge_window_names_its_end_in_chain_time() -> None:
    end = 1_796_000_000  # 2026-11-30 00:53:20 UTC
    error = decode_revert(revert_data("ChallengeWindowOpen(uint256,uint256)", ["uint256"] * 2, [7, end]))
    assert str(error) == (
        "the contract rejected the call: ChallengeWindowOpen(taskId=7, endsAt=1796000000); not yet: possible "
        "after 2026-11-30 00:53:20 UTC of chain time (a local anvil: run it with --block-time 1 so that its "
        "clock follows the wall clock, or `cast rpc evm_increaseTime SECONDS` then `cast rpc evm_mine`; "
        "docs/coordinator.md#devnet-recipes)"
    )


def test_every_not_yet_error_of_the_contracts_is_explained() -> None:
    """Each error whose when-argument the table names exists in the packaged ABIs with that argument."""
    cases = {
        "AuditSeedNotReady(uint256,uint256)": "possible once the chain has mined block 9",
        "AnswerPeriodNotOver(uint256,uint256,uint256)": "possible after 1970-01-01 00:00:09 UTC",
        "DeadlineNotPassed(uint256,uint256)": "possible after 1970-01-01 00:00:09 UTC",
        "ReleaseNotDue(uint256,uint256)": "possible after 1970-01-01 00:00:09 UTC",
        "UnbondingNotFinished(uint256,uint256)": "possible after 1970-01-01 00:00:09 UTC",
        "VerifierUnbondingNotFinished(uint256,uint256)": "possible after 1970-01-01 00:00:09 UTC",
    }
    for signature, expected in cases.items():
        count = signature.count("uint256")
        # the when-argument is the last one, except the unbonding errors' (releaseAt, nowTime)
        values = [9, 1] if "Unbonding" in signature else [1] * (count - 1) + [9]
        message = str(decode_revert(revert_data(signature, ["uint256"] * count, values)))
        assert expected in message, message


def test_an_error_that_is_not_a_wait_reads_as_before() -> None:
    error = decode_revert(revert_data("DeadlinePassed(uint256,uint256)", ["uint256"] * 2, [3, 9]))
    assert str(error) == "the contract rejected the call: DeadlinePassed(taskId=3, deadline=9)"
