"""What corrupting a dispute's jury costs, against what one dispute can move (docs/security.md).

An attacker holds a share p of the verifiers' seat weight. Honest jurors always reveal the true vote; both
sides appeal a round they lost while they can, so the last round (23 seats) always runs and decides. Each
round's seats are drawn as independent binomials (draws with replacement by weight: what the contract does).
The attacker wins iff it holds a strict majority of the last round: P_win(p) = P[Bin(23, p) >= 12].

Two bounds on V, the value one dispute moves, below which corruption does not pay a risk-neutral attacker:

- simple: the attacker loses the penalty on each of its seats of every round (39p expected) when it loses,
  and gains nothing else: V_max = (1 - P_win) / P_win * 39p * penalty. Tends to 19.5 * penalty as p -> 1/2.
- net: what the contract does. Losing, it pays the penalty on its seats given that it lost (fewer than 23p in
  the last round). Winning, its seats are the coherent ones and collect the penalty of every honest seat.
  V_max = (E[attacker seats; lose] - E[honest seats; win]) * penalty / P_win. Tends to 0 as p -> 1/2.
  Bonds (5, 10, 20 tokens) and the 10% juror reward (paid out of V) are left out.

The binomial model is the contract's draw (`VerifierRegistry.drawSeats`): every seat lands by weight, with
replacement, as the pool stood when the round opened, and seats that other rounds locked play no part. The
second table simulates it, an attacker holding its share as one whale registration against one-seat honest
verifiers, beside the previous draw over free seats (a landing counted with probability free seats / weight,
each seat drawn at most once per round), alone and with a quarter of the honest verifiers' seats locked by
other disputes: the lever that made the order of draws, and cheap disputes elsewhere, choose juries.

Parameters are the defaults of contracts/script/Deploy.s.sol. Prints the tables and writes them, with a plot
of both bounds against the cap, under bench/results/.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.table import Table
from scipy.optimize import brentq
from scipy.stats import binom

from bench._report import figure, publish

SEAT_STAKE = 100.0  # tokens: VerifierRegistry.minStake, one seat
PENALTY_BPS = 5_000  # jurorPenaltyBps
BASE_JURY = 5
ROUNDS = 3
MAX_VALUE_AT_RISK = 900.0  # tokens: TaskRegistry.maxValueAtRisk, deploy default
CAPS = (900.0, 1_000.0)
SHARES = (0.05, 0.10, 0.20, 0.30, 0.40, 0.45, 0.49, 0.499)
SIZES: list[int] = [(BASE_JURY + 1) * 2**r - 1 for r in range(ROUNDS)]  # 5, 11, 23
SEAT_PENALTY = SEAT_STAKE * PENALTY_BPS / 10_000


def win_probability(share: float, seats: int) -> float:
    """P[an attacker holding `share` of the weight holds a strict majority of `seats`]."""
    return float(binom.sf(seats // 2, seats, share))


def simple_bound(share: float, penalty: float = SEAT_PENALTY) -> float:
    """(1 - P_win) / P_win * 39p * penalty: penalties lost, nothing won."""
    p_win = win_probability(share, SIZES[-1])
    return (1 - p_win) / p_win * sum(SIZES) * share * penalty


def net_bound(share: float, penalty: float = SEAT_PENALTY) -> float:
    """Expected penalties the attacker pays when it loses, less those it collects when it wins, over P_win."""
    last = SIZES[-1]
    earlier = sum(SIZES[:-1])
    seats = np.arange(last + 1)
    mass = binom.pmf(seats, last, share)
    wins = seats > last // 2
    p_win = float(mass[wins].sum())
    paid = (1 - p_win) * earlier * share + float((seats * mass)[~wins].sum())
    won = p_win * earlier * (1 - share) + float(((last - seats) * mass)[wins].sum())
    return (paid - won) * penalty / p_win


def safe_share(cap: float, penalty: float = SEAT_PENALTY) -> float:
    """The largest share at which the net bound still covers `cap` (the net bound falls with the share)."""
    return brentq(lambda s: net_bound(s, penalty) - cap, 0.2, 0.4999999)


HONEST_VERIFIERS = 200  # one-seat honest verifiers in the simulated pool
TRIALS = 20_000  # juries simulated per share
ATTEMPTS_PER_SEAT = 4  # VerifierRegistry.DRAW_ATTEMPTS_PER_SEAT
HONEST_LOCKED = 0.25  # share of the honest verifiers whose one seat other disputes hold, for the earlier draw


def contract_draw(share: float, seats: int, rng: np.random.Generator) -> tuple[float, float]:
    """(P[the whale holds a strict majority], its mean share of the seats) over TRIALS juries drawn as
    `VerifierRegistry.drawSeats` draws them: every seat lands by weight as the pool stood at the round's
    opening, whatever other rounds locked (no stake was penalized here, so no landing is thinned)."""
    whale = max(1, round(share / (1 - share) * HONEST_VERIFIERS))
    landings = rng.integers(0, whale + HONEST_VERIFIERS, (TRIALS, seats))
    mine = (landings < whale).sum(axis=1)
    return float((2 * mine > seats).mean()), float((mine / seats).mean())


def free_seat_draw(share: float, seats: int, locked: float, rng: np.random.Generator) -> tuple[float, float]:
    """The same for the contract's previous draw, over free seats: a landing counted with probability free
    seats / weight and each seat was drawn at most once per round, four draws per seat at most; `locked` of
    the honest verifiers sit on other disputes, so their landings are lost."""
    whale = max(1, round(share / (1 - share) * HONEST_VERIFIERS))
    total = whale + HONEST_VERIFIERS
    busy = set(range(whale, whale + round(locked * HONEST_VERIFIERS)))
    wins, shares = 0, 0.0
    for _ in range(TRIALS):
        landings = rng.integers(0, total, seats * ATTEMPTS_PER_SEAT)
        coins = rng.random(seats * ATTEMPTS_PER_SEAT)
        whale_free, honest_taken = whale, set(busy)
        mine = drawn = 0
        for point, coin in zip(landings.tolist(), coins.tolist(), strict=True):
            if drawn == seats:
                break
            if point < whale:
                if coin >= whale_free / whale:
                    continue
                whale_free -= 1
                mine += 1
            elif point in honest_taken:
                continue
            else:
                honest_taken.add(point)
            drawn += 1
        wins += 2 * mine > drawn
        shares += mine / drawn
    return wins / TRIALS, shares / TRIALS


def draw_table() -> Table:
    table = Table(
        "attacker share",
        f"P_win binomial, {SIZES[-1]} seats",
        "P_win, contract's draw",
        "mean seat share, contract's draw",
        "P_win, free-seat draw",
        "mean seat share, free-seat draw",
        f"P_win, free-seat draw, {HONEST_LOCKED:.0%} honest locked",
        f"mean seat share, free-seat draw, {HONEST_LOCKED:.0%} honest locked",
        title=(
            f"The contract's draw, simulated: one whale against {HONEST_VERIFIERS} one-seat verifiers, "
            f"{SIZES[-1]} seats, {TRIALS:,} juries per row; beside it the previous draw over free seats"
        ),
    )
    rng = np.random.default_rng(2026)
    for share in (0.30, 0.40, 0.44, 0.45, 0.49):
        now = contract_draw(share, SIZES[-1], rng)
        free = free_seat_draw(share, SIZES[-1], 0.0, rng)
        busy = free_seat_draw(share, SIZES[-1], HONEST_LOCKED, rng)
        table.add_row(
            f"{share:g}",
            f"{win_probability(share, SIZES[-1]):.3f}",
            *(f"{value:.3f}" for value in (*now, *free, *busy)),
        )
    return table


def main() -> None:
    table = Table(
        "attacker share",
        *(f"P_win, {n} seats" for n in SIZES),
        "penalty if it loses (39p x 50)",
        "V_max simple",
        "V_max net",
        title=(
            f"Cost to corrupt a jury: seat stake {SEAT_STAKE:.0f} tokens, penalty {PENALTY_BPS / 100:.0f}%, "
            f"juries {'/'.join(map(str, SIZES))}; V_max in tokens"
        ),
    )
    for share in SHARES:
        table.add_row(
            f"{share:g}",
            *(f"{win_probability(share, n):.3g}" for n in SIZES),
            f"{sum(SIZES) * share * SEAT_PENALTY:,.1f}",
            f"{simple_bound(share):,.1f}",
            f"{net_bound(share):,.1f}",
        )
    grid = np.linspace(0.01, 0.4999, 5_000)
    simple_inf = min(simple_bound(s) for s in grid)
    limit = sum(SIZES) / 2 * SEAT_PENALTY
    lines = [
        f"simple: infimum over p < 1/2 = {limit:,.1f} tokens (the limit at p -> 1/2; "
        f"grid minimum {simple_inf:,.1f})",
        *(
            f"  cap {cap:,.0f}: {'within' if cap < limit else 'NOT within'} it; holds for seat stake >= "
            f"{SEAT_STAKE * cap / limit:,.1f} tokens (or penalty >= {PENALTY_BPS / 100 * cap / limit:.1f}%)"
            for cap in CAPS
        ),
        "net: V_max -> 0 as p -> 1/2: no seat stake covers every share below 1/2",
        *(
            f"  cap {cap:,.0f}: holds for p <= {safe_share(cap):.3f} at seat stake {SEAT_STAKE:.0f}; "
            "seat stake to hold up to p = "
            + ", ".join(f"{s:g}: {SEAT_STAKE * cap / net_bound(s):,.0f}" for s in (0.40, 0.45, 0.49))
            + " tokens"
            for cap in CAPS
        ),
    ]
    publish("jury_security", [table, draw_table()], width=150, notes=lines, plot=plot)


def plot(path: Path) -> None:
    shares = np.linspace(0.25, 0.4995, 200)
    with figure(path, figsize=(7, 4)) as axes:
        axes.semilogy(shares, [simple_bound(s) for s in shares], label="V_max simple (penalties lost only)")
        axes.semilogy(shares, [net_bound(s) for s in shares], label="V_max net (less penalties won)")
        axes.axhline(MAX_VALUE_AT_RISK, color="red", linestyle="--", label="maxValueAtRisk (900)")
        axes.set_xlabel("attacker's share of verifier seat weight")
        axes.set_ylabel("tokens one dispute may move")
        axes.legend()


if __name__ == "__main__":
    main()
