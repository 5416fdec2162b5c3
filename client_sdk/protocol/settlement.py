"""Money, as pure arithmetic: the coordinator's fee and how the miners' part is split (what a batch costs is
`TaskPrices.cost`, the contract's own rule). The coordinator computes the split and every miner recomputes it
before signing. Exact integers only (token base units), so the amounts always add up to what the contract
checks."""

from __future__ import annotations

from collections.abc import Sequence

BPS = 10_000


def fee(amount: int, fee_bps: int) -> int:
    """The coordinator's cut, rounded down exactly as TaskRegistry computes it."""
    return amount * fee_bps // BPS


def split(amount: int, weights: Sequence[int]) -> list[int]:
    """`amount` in proportion to `weights`, by largest remainder (ties to the earlier entry); sums exactly to
    `amount`. All-zero weights split evenly."""
    if not weights:
        raise ValueError("split needs at least one weight")
    if any(w < 0 for w in weights):
        raise ValueError("weights cannot be negative")
    total = sum(weights)
    if total == 0:
        weights, total = [1] * len(weights), len(weights)
    shares = [amount * w // total for w in weights]
    remainders = sorted(range(len(weights)), key=lambda i: (-(amount * weights[i] % total), i))
    for i in remainders[: amount - sum(shares)]:
        shares[i] += 1
    return shares
