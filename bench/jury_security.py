"""What corrupting a dispute's jury costs, against what a dispute can move (docs/security.md).

An attacker holds a share p of the verifiers' seat weight; honest jurors always reveal the truth, and an
honest party that loses a round always appeals while it can. The attacker's outcome stands only if it holds a
strict majority of the last round's seats, so P_win(p) = P[Bin(23, p) >= 12] (draws with replacement: a
binomial; drawing without replacement only lowers the attacker's odds). When it loses, each of its seats in
every round (39p expected over 5 + 11 + 23) is incoherent and loses the seat penalty. A risk-neutral attacker
gains in expectation only if V * P_win > (1 - P_win) * 39p * penalty, so a dispute is unprofitable to corrupt
when V < V_max(p) = (1 - P_win) / P_win * 39p * penalty. V_max falls as p grows and tends to 19.5 * penalty as
p tends to one half; beyond one half (a majority of the verifiers' stake) nothing protects a dispute.

The parameters are the deploy script's defaults (contracts/script/Deploy.s.sol). Prints the table and writes
it, with a plot of V_max against the cap, under bench/results/.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from scipy.stats import binom

RESULTS = Path(__file__).parent / "results"
SEAT_STAKE = 100.0  # tokens: VerifierRegistry.minStake, one seat
PENALTY_BPS = 5_000  # jurorPenaltyBps
BASE_JURY = 5
ROUNDS = 3
MAX_VALUE_AT_RISK = 900.0  # tokens: TaskRegistry.maxValueAtRisk
SHARES = (0.05, 0.10, 0.20, 0.30, 0.40, 0.45, 0.49, 0.499, 0.4999)


def jury_sizes() -> list[int]:
    """Seats per round: 2^r * (base + 1) - 1."""
    return [(BASE_JURY + 1) * 2**r - 1 for r in range(ROUNDS)]


def win_probability(share: float, seats: int) -> float:
    """P[an attacker holding `share` of the weight holds a strict majority of `seats`]."""
    return float(binom.sf(seats // 2, seats, share))


def value_bound(share: float, seat_penalty: float) -> float:
    """V_max(share): the most a dispute may move and stay unprofitable to corrupt at that share."""
    sizes = jury_sizes()
    p_win = win_probability(share, sizes[-1])
    expected_loss = sum(sizes) * share * seat_penalty
    return (1 - p_win) / p_win * expected_loss


def limit_bound(seat_penalty: float) -> float:
    """The infimum of V_max over shares below one half: (1/2 * sum of seats) * penalty."""
    return sum(jury_sizes()) / 2 * seat_penalty


def main() -> None:
    seat_penalty = SEAT_STAKE * PENALTY_BPS / 10_000
    sizes = jury_sizes()
    table = Table(
        "attacker share",
        *(f"P_win, {n} seats" for n in sizes),
        "expected penalty if it loses",
        "V_max (tokens)",
        title=(
            f"Cost to corrupt a jury: seat stake {SEAT_STAKE:.0f}, penalty {PENALTY_BPS / 100:.0f}%, "
            f"juries {'/'.join(map(str, sizes))}"
        ),
    )
    for share in SHARES:
        table.add_row(
            f"{share:.4g}",
            *(f"{win_probability(share, n):.3g}" for n in sizes),
            f"{sum(sizes) * share * seat_penalty:,.1f}",
            f"{value_bound(share, seat_penalty):,.1f}",
        )
    limit = limit_bound(seat_penalty)
    needed = MAX_VALUE_AT_RISK / (sum(sizes) / 2) / (PENALTY_BPS / 10_000)
    console = Console(record=True, width=130)
    console.print(table)
    console.print(
        f"infimum of V_max over shares below 1/2: {limit:,.1f} tokens; the cap maxValueAtRisk is "
        f"{MAX_VALUE_AT_RISK:,.0f} tokens: {'within' if limit > MAX_VALUE_AT_RISK else 'NOT within'} it "
        f"(the cap holds for any seat stake of at least {needed:,.1f} tokens at this penalty)"
    )
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "jury_security.txt").write_text(console.export_text())
    plot(seat_penalty, limit)


def plot(seat_penalty: float, limit: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shares = [0.25 + i * 0.0025 for i in range(100)]
    figure, axes = plt.subplots(figsize=(7, 4))
    axes.semilogy(shares, [value_bound(s, seat_penalty) for s in shares], label="V_max (unprofitable below)")
    axes.axhline(MAX_VALUE_AT_RISK, color="red", linestyle="--", label="maxValueAtRisk")
    axes.axhline(limit, color="grey", linestyle=":", label="limit as the share tends to 1/2")
    axes.set_xlabel("attacker's share of verifier seat weight")
    axes.set_ylabel("tokens a dispute may move")
    axes.legend()
    figure.tight_layout()
    figure.savefig(RESULTS / "jury_security.png", dpi=120)


if __name__ == "__main__":
    main()
