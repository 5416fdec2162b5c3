"""`arbitration verify`: run a staked verifier (registered in miner.cli.arbitration)."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Annotated

import httpx
import typer

from client_sdk.chain.contracts import Market
from client_sdk.cli.support import (
    DEFAULT_COORDINATOR,
    CoordinatorOption,
    DeviceOption,
    DtypeOption,
    ModelDirOption,
    console,
    log_to_console,
    on_chain,
)
from client_sdk.errors import UserError
from client_sdk.http import coordinator_client
from client_sdk.protocol.model_identity import describe as describe_model
from client_sdk.units import parse_amount
from miner.model.dtypes import dtype_named
from miner.verify.daemon import LineJudge, Verifier


def ensure_registered(market: Market, stake: int | None, model: bytes) -> None:
    """Stakes and registers this wallet as a verifier of `model` (the checkpoint it re-runs) unless it already
    is one (an address registers once); a verifier of other models joins this model's pool too. Juries are
    drawn per model, so a verifier is never seated on a task it cannot judge."""
    assert market.transactor is not None
    me = market.transactor.account.address
    verifiers = market.verifiers
    if verifiers.is_verifier(me):
        if not verifiers.judges(me, model):
            judged = verifiers.models_of(me)
            if len(judged) >= verifiers.max_models():
                raise UserError(
                    f"{me} judges {len(judged)} models, the most one verifier may: "
                    "`arbitration leave-model HASH` one of them first"
                )
            verifiers.add_model(model)
            console.print(f"{me} now also judges {describe_model(model)}", soft_wrap=True)
        return
    if verifiers.verifier_of(me).registered_at_block:
        raise UserError(
            f"{me} has left the verifier set (an address registers once); withdraw its stake and use another"
        )
    minimum = verifiers.min_stake()
    amount = minimum if stake is None else stake
    if amount < minimum:
        raise UserError(f"the verifier stake must be at least {market.amount(minimum)}")
    balance = market.token.balance_of(me)
    if balance < amount:
        raise UserError(
            f"staking {market.amount(amount)} needs that much; {me} holds {market.amount(balance)}"
        )
    with market.token.allowing(me, verifiers.address, amount):
        verifiers.register(amount, [model])
    console.print(
        f"registered {me} as a verifier of {describe_model(model)} with {market.amount(amount)} staked: "
        f"{amount // minimum} seat(s) of weight in its jury draws",
        soft_wrap=True,
    )


@on_chain(signing=True)
def verify(
    market: Market,
    model_dir: ModelDirOption,
    stake: Annotated[
        str | None, typer.Option(help="Tokens to stake when registering (default: the minimum), e.g. 100.")
    ] = None,
    coordinator: CoordinatorOption = DEFAULT_COORDINATOR,
    device: DeviceOption = "cpu",
    dtype: DtypeOption = "float32",
    no_audits: Annotated[
        bool,
        typer.Option(
            "--no-audits",
            help="Only serve on juries: draw no random audits of committed tasks (by default it also draws "
            "them and re-scores the selected lines).",
        ),
    ] = False,
    poll_s: Annotated[float, typer.Option(min=0.1, help="Seconds between passes over the chain.")] = 2.0,
    max_appeal_bond: Annotated[
        str | None,
        typer.Option(
            help="Most this verifier posts to appeal an acquittal of a line it audited and finds at fault, "
            "e.g. 20 (default: the task's stake lock, which the conviction would take).",
        ),
    ] = None,
) -> None:
    """Register as a staked verifier of the model in --model-dir (once; a verifier of other models joins its
    pool too), then until Ctrl-C: draw juries, and on every jury this wallet sits on commit and then reveal a
    vote from re-scoring the evidence; audit randomly selected lines of committed tasks, opening a dispute
    when one fails, and appeal a round that acquits such a line; resolve disputes whose last phase has
    ended."""
    assert market.transactor is not None  # signing
    appeal_bound = None if max_appeal_bond is None else parse_amount(max_appeal_bond)
    judge = LineJudge.load(model_dir, device, dtype_named(dtype))
    ensure_registered(market, None if stake is None else parse_amount(stake), judge.model_hash)
    log_to_console()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with coordinator_client(coordinator, market.transactor.account, 60) as http:
        verifier = Verifier(market, http, judge, audits=not no_audits, max_appeal_bond=appeal_bound)
        console.print(f"verifying as {verifier.address}; Ctrl-C stops")
        try:
            while not stop.is_set():
                try:
                    verifier.step()
                except (UserError, httpx.HTTPError) as exc:  # a failed call is retried next pass
                    logging.getLogger("batchmarket.verifier").warning("%s", exc)
                stop.wait(poll_s)
        except KeyboardInterrupt:
            pass
