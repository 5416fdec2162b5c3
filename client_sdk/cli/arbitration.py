"""`arbitration dispute open | show | list | draw | appeal | resolve`: challenge one committed result line
with a bond, follow its rounds on-chain (jury drawn, votes committed then revealed), appeal a round you lost,
and resolve it once its last phase is over. `arbitration line` (client_sdk/cli/challenges.py): have lines of
your task's results shown to you."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Column, Table

from client_sdk.chain.contracts import Market
from client_sdk.chain.types import LAST_ROUND, Dispute, DisputeStatus, Phase, current_phase
from client_sdk.cli import challenges
from client_sdk.cli.support import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    DeploymentOption,
    JsonOption,
    KeystoreOption,
    RpcUrlOption,
    command_group,
    console,
    error_console,
    on_chain,
    one_line_errors,
    open_market,
    with_client,
)
from client_sdk.client import ApiError, Client
from client_sdk.errors import UserError
from client_sdk.inputs import input_tree
from client_sdk.protocol.model_identity import describe, model_id_of
from client_sdk.protocol.task import Task, TaskStatus
from client_sdk.units import format_amount, format_utc
from client_sdk.verify import VerifiedLine, WrongUsage, check_inputs

app = command_group("Dispute results and verify disputes.")
dispute_app = command_group("Disputes over single result lines.")
app.add_typer(dispute_app, name="dispute")
app.add_typer(challenges.app, name="line")

MAX_SCAN = 1_000  # `list` reads at most this many of the newest disputes
OUTCOMES = {
    DisputeStatus.MINERS_AT_FAULT: (
        "the miners were at fault: their stake is slashed, the owner refunded with its bond back; the "
        "jurors' share of the slash goes to the jurors, the rest to the audit pool"
    ),
    DisputeStatus.MINERS_CORRECT: (
        "the results were correct: the task settles; the owner's bond pays the jurors and the miners"
    ),
    DisputeStatus.NO_DECISION: (
        "no majority (a tie, no reveal, or no jury drawn in time): the results stand and the owner's bond "
        "comes back less the no-decision fee"
    ),
}
AUDIT_NO_DECISION = (
    "no majority (a tie, no reveal, or no jury drawn in time): the results stand and the bond goes back to "
    "the audit pool"
)
PHASES = {
    Phase.DRAWING: "waiting for its jury to be drawn",
    Phase.COMMIT: "jurors commit sealed votes",
    Phase.REVEAL: "jurors reveal their votes",
    Phase.APPEAL: "the losing side may appeal",
    Phase.OVER: "over: anyone may resolve",
}

DisputeIdArgument = Annotated[int, typer.Argument(min=1, help="On-chain dispute id.")]


def _existing(market: Market, dispute_id: int) -> Dispute:
    record = market.arbitration.get_dispute(dispute_id)
    if record.status == DisputeStatus.NONE:
        raise UserError(f"there is no dispute {dispute_id}")
    return record


def _report(market: Market, dispute_id: int, record: Dispute) -> dict[str, object]:
    current = market.arbitration.round_of(dispute_id, record.round)
    phase = current_phase(record, current, market.chain_time())
    return {
        "dispute": dispute_id,
        "task": record.task_id,
        "request_index": record.request_index,
        "challenger": record.challenger,
        "opener": record.opener,
        "bond": format_amount(record.bond),
        "status": record.status.name.lower(),
        "round": record.round,
        "seats": f"{current.seats_drawn} of {current.seats}",
        "votes_correct": current.votes_correct,
        "votes_at_fault": current.votes_at_fault,
        "phase": phase.name.lower() if record.status == DisputeStatus.OPEN else "resolved",
        "phase_ends": current.ends_at(phase) if record.status == DisputeStatus.OPEN else 0,
        "leaf_hash": "0x" + record.leaf_hash.hex(),
        "audit": record.audit,
    }


def _check_disputable(market: Market, task_id: int) -> Task:
    """Refuses, before any transaction, what the contract would refuse: a second dispute, a closed window;
    returns the task as read for the check."""
    existing = market.arbitration.dispute_of_task(task_id)
    if existing:
        raise UserError(
            f"task {task_id} already has your dispute {existing} (one per task): see `arbitration dispute "
            f"show {existing}`"
        )
    task = market.tasks.get_task(task_id)
    if task.status == TaskStatus.DISPUTED:
        return task  # an audit runs: the owner may dispute until it ends, and after it for the time it took
    closes = market.tasks.challenge_ends_at(task_id)
    if task.committed_at and market.chain_time() >= closes:
        raise UserError(f"the challenge window of task {task_id} closed at {format_utc(closes)}")
    if task.status != TaskStatus.RESULTS_COMMITTED:
        raise UserError(
            f"task {task_id} is {task.status.name.lower()}: it has no committed results to dispute"
        )
    return task


def _disputed_line(client: Client, batch_id: str, custom_id: str) -> VerifiedLine:
    """The line with its leaf and proof, from results that verify against the chain (so it is in the root)."""
    with console.status("downloading and verifying the results against the chain"):
        verified = client.batches.results(batch_id)
    line = next((v for v in (*verified.output, *verified.errors) if v.line["custom_id"] == custom_id), None)
    if line is None:
        raise UserError(f"batch {batch_id} has no result line with custom_id {custom_id!r}")
    return line


def _check_bond(market: Market, payer: str, bond: int, what: str) -> None:
    """Checks that `payer` holds the bond (the escrow pulls it under `Token.allowing`)."""
    balance = market.token.balance_of(payer)
    if balance < bond:
        raise UserError(f"the {what} is {market.amount(bond)} but {payer} holds {market.amount(balance)}")


@dispute_app.command("open")
@with_client
def open_dispute(
    client: Client,
    batch_id: Annotated[str, typer.Option("--batch", help="Batch id (batch_...).")],
    custom_id: Annotated[str, typer.Option("--custom-id", help="The custom_id of the line to dispute.")],
    reason: Annotated[str | None, typer.Option(help="Why the line looks wrong (published with it).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Challenge one result line: post the bond, open the dispute on-chain and publish its evidence."""
    me = client.account.address
    try:
        batch = client.batches.retrieve(batch_id)
    except ApiError as exc:
        if exc.status != 404:
            raise
        raise UserError(
            f"batch {batch_id} is not a batch of {me}: only its owner can dispute its lines"
        ) from None
    market = client.market
    task = _check_disputable(market, batch.task_id)
    disputed = _disputed_line(client, batch_id, custom_id)
    inputs = check_inputs(batch.task_id, task.input_root, client.files.content(batch.input_file_id))
    index = disputed.leaf.request_index
    input_proof = ["0x" + p.hex() for p in input_tree(inputs).proof(index)]
    bond = market.arbitration.config_of(batch.task_id).dispute_bond
    _check_bond(market, me, bond, "dispute bond")
    if market.verifiers.total_weight(task.model_id) == 0:
        error_console.print(
            f"warning: no verifier judges {describe(task.model_id)} now: unless one joins its pool, no jury "
            "can sit and the dispute ends undecided, the line paid as committed (drawn: at once, the bond "
            "back whole; left undrawn past its drawing phase: the bond back less the no-decision fee)",
            soft_wrap=True,
            markup=False,
        )
    with market.token.allowing(me, market.escrow.address, bond):
        dispute_id = market.arbitration.open_dispute(disputed.leaf, disputed.proof, disputed.served_proofs)
    evidence = {
        "request_line": inputs[index],
        "input_proof": input_proof,
        "result_line": disputed.line,
        "reason": reason,
    }
    try:
        client.request("POST", f"/v1/disputes/{dispute_id}/evidence", json=evidence)
    except UserError as exc:
        raise UserError(
            f"dispute {dispute_id} is open on-chain, but its evidence was not published: {exc}"
        ) from exc
    record = market.arbitration.get_dispute(dispute_id)
    if as_json:
        console.print_json(json.dumps(_report(market, dispute_id, record) | {"custom_id": custom_id}))
        return
    phase, seed_block = record.terms.phase, market.arbitration.round_of(dispute_id, 0).seed_block
    console.print(
        f"dispute {dispute_id} opened on task {record.task_id}, line {record.request_index} (custom_id "
        f"{custom_id!r}): bond {market.amount(record.bond)} posted, evidence published; a jury of "
        f"{record.terms.base_jury} is drawn once the chain has mined block {seed_block} (its seed), then "
        f"commits and reveals its votes ({phase // 3600} h {phase % 3600 // 60} min per phase)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@dispute_app.command("show")
@on_chain(signing=False)
def show(
    market: Market,
    dispute_id: DisputeIdArgument,
    as_json: JsonOption = False,
) -> None:
    """Show a dispute: its task, line, bond, current round (seats, votes, phase) and outcome, and the jurors
    of each round."""
    record = _existing(market, dispute_id)
    report = _report(market, dispute_id, record)
    if as_json:
        console.print_json(json.dumps(report))
        return
    ends = int(str(report["phase_ends"]))
    table = Table(show_header=False, title=f"dispute {dispute_id}")
    for key, value in (report | {"phase_ends": format_utc(ends) if ends else "-"}).items():
        table.add_row(key.replace("_", " "), str(value))
    console.print(table)
    jurors = Table("round", "juror", "seats", "vote", title="jurors")
    for round_index in range(record.round + 1):
        for juror in market.arbitration.jurors_of(dispute_id, round_index):
            seat = market.arbitration.juror_of(dispute_id, round_index, juror)
            vote = (
                seat.vote.name.lower() if seat.vote else ("committed" if any(seat.commitment) else "silent")
            )
            jurors.add_row(str(round_index), juror, str(seat.seats), vote)
    console.print(jurors)


@dispute_app.command("list")
@one_line_errors
def list_disputes(
    mine: Annotated[bool, typer.Option("--mine", help="Only disputes over your tasks (audits too).")] = False,
    limit: Annotated[int, typer.Option(min=1, max=100, help="How many, newest first.")] = 20,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    deployment: DeploymentOption = DEFAULT_DEPLOYMENT,
    keystore: KeystoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """List disputes, newest first, from the chain (among the newest 1,000)."""
    market = open_market(rpc_url, deployment, keystore, signing=mine)
    challenger = market.address if mine else None
    newest = market.arbitration.dispute_count()
    found: list[tuple[int, Dispute]] = []
    for dispute_id in range(newest, max(0, newest - MAX_SCAN), -1):
        record = market.arbitration.get_dispute(dispute_id)
        if challenger is None or record.challenger == challenger:
            found.append((dispute_id, record))
        if len(found) == limit:
            break
    reports = [_report(market, dispute_id, record) for dispute_id, record in found]
    if as_json:
        console.print_json(json.dumps(reports))
        return
    columns = [Column(h, overflow="fold") for h in ("dispute", "task", "line")]
    columns.append(Column("state", no_wrap=True, min_width=len("miners_at_fault")))
    columns += [Column(h, overflow="fold") for h in ("round", "seats", "votes ok/bad", "phase ends")]
    table = Table(*columns)
    for r in reports:
        ends = int(str(r["phase_ends"]))
        state = r["phase"] if r["status"] == "open" else r["status"]
        votes = f"{r['votes_correct']}/{r['votes_at_fault']}"
        cells = (r["dispute"], r["task"], r["request_index"], state, r["round"], r["seats"], votes)
        table.add_row(*map(str, cells), format_utc(ends) if ends else "-")
    console.print(table)


@dispute_app.command("draw")
@on_chain(signing=True)
def draw(
    market: Market,
    dispute_id: DisputeIdArgument,
) -> None:
    """Draw the current round's jury (anyone may, once its seed block exists; verifiers do it on their
    own)."""
    record = _existing(market, dispute_id)
    current = market.arbitration.round_of(dispute_id, record.round)
    if record.status != DisputeStatus.OPEN or current.drawn:
        raise UserError(f"dispute {dispute_id} round {record.round} has no jury left to draw")
    latest = market.w3.eth.block_number
    if latest <= current.seed_block:
        raise UserError(
            f"dispute {dispute_id} round {record.round}: its seed is the random value of block "
            f"{current.seed_block}, not mined yet (the chain is at block {latest}); draw from block "
            f"{current.seed_block + 1} on"
        )
    market.arbitration.draw_jury(dispute_id)
    drawn = market.arbitration.round_of(dispute_id, record.round)
    if not drawn.drawn:
        console.print(
            f"dispute {dispute_id} round {record.round}: not all {drawn.seats} seats could be drawn, so the "
            "appeal ended undrawn: the previous round's outcome stands (anyone may resolve the dispute now)",
            soft_wrap=True,
        )
        return
    if drawn.seats_drawn == 0:
        console.print(
            f"dispute {dispute_id} round {record.round}: no seat could be drawn (all the weight of the "
            "model's pool is a party's, or there is none): the round ended undecided, and the opener's bond "
            "comes back whole (anyone may resolve the dispute now)",
            soft_wrap=True,
        )
        return
    console.print(
        f"dispute {dispute_id} round {record.round}: {drawn.seats_drawn} of {drawn.seats} seats drawn; "
        f"jurors commit until {format_utc(drawn.commit_deadline)}",
        soft_wrap=True,
    )


@dispute_app.command("appeal")
@on_chain(signing=True)
def appeal(
    market: Market,
    dispute_id: DisputeIdArgument,
) -> None:
    """Appeal the current round's outcome to a larger jury (the task owner after losing, or a miner of the
    disputed line after a conviction), posting twice the round's bond."""
    record = _existing(market, dispute_id)
    current = market.arbitration.round_of(dispute_id, record.round)
    phase = current_phase(record, current, market.chain_time())
    if record.status != DisputeStatus.OPEN or phase != Phase.APPEAL:
        raise UserError(
            f"dispute {dispute_id} cannot be appealed now: round {record.round} is {PHASES[phase]}"
            + (" (the last round cannot be appealed)" if record.round == LAST_ROUND else "")
        )
    bond = current.bond * 2
    _check_bond(market, market.address, bond, "appeal bond")
    with market.token.allowing(market.address, market.escrow.address, bond):
        market.arbitration.appeal(dispute_id)
    seats = market.arbitration.round_of(dispute_id, record.round + 1).seats
    console.print(
        f"dispute {dispute_id} appealed: round {record.round + 1}, {seats} seats, bond {market.amount(bond)} "
        "posted (back to you if your side wins)",
        soft_wrap=True,
    )


@dispute_app.command("resolve")
@on_chain(signing=True)
def resolve(
    market: Market,
    dispute_id: DisputeIdArgument,
    as_json: JsonOption = False,
) -> None:
    """Resolve a dispute once its last round is over (anyone may): the last round's majority decides where the
    money goes."""
    record = _existing(market, dispute_id)
    if record.status != DisputeStatus.OPEN:
        raise UserError(f"dispute {dispute_id} is already resolved: {record.status.name.lower()}")
    now = market.chain_time()
    current = market.arbitration.round_of(dispute_id, record.round)
    phase = current_phase(record, current, now)
    if phase != Phase.OVER:
        raise UserError(
            f"dispute {dispute_id} round {record.round}: {PHASES[phase]} until "
            f"{format_utc(current.ends_at(phase))} (chain time is {format_utc(now)}): resolve it "
            "after that"
        )
    outcome = market.arbitration.resolve(dispute_id)
    said = AUDIT_NO_DECISION if record.audit and outcome == DisputeStatus.NO_DECISION else OUTCOMES[outcome]
    if as_json:
        console.print_json(
            json.dumps(_report(market, dispute_id, market.arbitration.get_dispute(dispute_id)))
        )
        return
    console.print(f"dispute {dispute_id}: {outcome.name.lower()}: {said}", markup=False, soft_wrap=True)


def _duty(market: Market, me: str, now: int) -> list[dict[str, object]]:
    """The open disputes (among the newest 1,000) whose current round seats `me`, and what each needs now."""
    duty: list[dict[str, object]] = []
    newest = market.arbitration.dispute_count()
    for dispute_id in range(newest, max(0, newest - MAX_SCAN), -1):
        record = market.arbitration.get_dispute(dispute_id)
        if record.status != DisputeStatus.OPEN:
            continue
        seat = market.arbitration.juror_of(dispute_id, record.round, me)
        if seat.seats == 0:
            continue
        current = market.arbitration.round_of(dispute_id, record.round)
        phase = current_phase(record, current, now)
        committed, revealed = any(seat.commitment), seat.vote != 0
        if phase == Phase.COMMIT and not committed:
            needs = "commit your vote"
        elif phase == Phase.REVEAL and committed and not revealed:
            needs = "reveal your vote"
        elif phase in (Phase.REVEAL, Phase.APPEAL, Phase.OVER) and not revealed:
            needs = "nothing: you missed the vote, so your seats lose half their stake"
        else:
            needs = "nothing for now"
        ends = current.ends_at(phase)
        duty.append(
            {
                "dispute": dispute_id,
                "round": record.round,
                "seats": seat.seats,
                "locked": format_amount(seat.seats * record.terms.seat_stake),
                "phase": phase.name.lower(),
                "phase_ends": ends,
                "needs": needs,
            }
        )
    return duty


@app.command("refute-usage")
@with_client
def refute_usage(
    client: Client,
    batch_id: Annotated[str, typer.Option("--batch", help="Batch id (batch_...).")],
) -> None:
    """Refute a task's committed usage when its results add up to other token counts than it is paid for:
    the escrow comes back whole to the task's owner and the stake lock of every miner that signed the totals
    goes to the audit pool (no bond; the chain checks the proof)."""
    try:
        with console.status("downloading and verifying the results against the chain"):
            client.batches.results(batch_id)
    except WrongUsage as wrong:
        task_id = wrong.leaf.task_id
        client.market.tasks.refute_usage(wrong.leaf, wrong.proof)
        task = client.market.tasks.get_task(task_id)
        console.print(
            f"task {task_id}: usage refuted with line {wrong.leaf.request_index}; its owner {task.owner} "
            f"gets the escrow of {client.market.amount(task.max_price)} back as an escrow balance (`market "
            f"withdraw` takes it); each miner that signed the totals loses its stake lock of "
            f"{client.market.amount(task.stake_lock)} to the audit pool",
            soft_wrap=True,
        )
        return
    raise UserError(f"batch {batch_id}: the committed usage is what its results add up to; nothing to refute")


@app.command("status")
@on_chain(signing=True)
def status(
    market: Market,
    as_json: JsonOption = False,
) -> None:
    """Your verifier stake and jury duty: what is staked and locked by jury seats, every open dispute you sit
    on and what it needs from you now, and what the escrow owes you (juror rewards)."""
    me, now = market.address, market.chain_time()
    record = market.verifiers.verifier_of(me)
    models = market.verifiers.models_of(me) if record.active else []
    duty = _duty(market, me, now)
    report: dict[str, object] = {
        "verifier": me,
        "models": ["0x" + m.hex() for m in models],
        "stake": format_amount(record.stake),
        "locked_by_seats": format_amount(record.locked),
        "state": "active" if record.active else ("exiting" if record.registered else "not registered"),
        "release_at": record.release_at,
        "withdrawable": format_amount(market.escrow.balance_of(me)),
        "seats": duty,
    }
    if as_json:
        console.print_json(json.dumps(report))
        return
    if not record.registered:
        console.print(f"{me} is not a verifier: `arbitration verify --stake AMOUNT` registers and runs one")
    else:
        judged = ", ".join(describe(m) for m in models) or "no model"
        state = (
            f"active: drawable onto juries of {judged}"
            if record.active
            else f"exiting: no new juries; stake withdrawable from {format_utc(record.release_at)}"
        )
        console.print(
            f"{me}: {market.amount(record.stake)} staked, {market.amount(record.locked)} held by jury "
            f"seats; {state}",
            soft_wrap=True,
        )
    console.print(f"the escrow owes you {report['withdrawable']} (`market withdraw` takes it)")
    for d in duty:
        ends = int(str(d["phase_ends"]))
        console.print(
            f"dispute {d['dispute']} round {d['round']}: {d['seats']} seat(s), {d['locked']} locked; "
            f"phase {d['phase']}" + (f" until {format_utc(ends)}" if ends else "") + f"; needs: {d['needs']}",
            markup=False,
            soft_wrap=True,
        )


@app.command("exit")
@on_chain(signing=True)
def exit_verifier(
    market: Market,
) -> None:
    """Stop being drawn onto juries and start the unbonding period (seats you hold still need your votes)."""
    if not market.verifiers.is_verifier(market.address):
        raise UserError(f"{market.address} is not an active verifier")
    market.verifiers.request_exit()
    release = market.verifiers.verifier_of(market.address).release_at
    console.print(f"exiting: no new juries; `arbitration withdraw-stake` from {format_utc(release)}")


@app.command("leave-model")
@on_chain(signing=True)
def leave_model(
    market: Market,
    model: Annotated[str, typer.Argument(help="The model's 0x hash, or the name of a known model.")],
) -> None:
    """Stop being drawn onto juries of one model (a checkpoint you no longer run); seats you hold in its
    disputes still need your votes. `arbitration verify` with another model joins that one's pool."""
    model_id = model_id_of(model)
    if not market.verifiers.judges(market.address, model_id):
        raise UserError(f"{market.address} does not judge {describe(model_id)}")
    market.verifiers.remove_model(model_id)
    console.print(f"left the jury pool of {describe(model_id)}: no new juries of it", soft_wrap=True)


@app.command("withdraw-stake")
@on_chain(signing=True)
def withdraw_stake(
    market: Market,
) -> None:
    """Take back your verifier stake, after the unbonding period and once no jury seat holds any of it."""
    record = market.verifiers.verifier_of(market.address)
    if not record.registered:
        raise UserError(f"{market.address} has no verifier stake")
    if record.exit_at_block == 0:
        raise UserError("request your exit first: `arbitration exit`")
    if market.chain_time() < record.release_at:
        raise UserError(f"the unbonding period ends at {format_utc(record.release_at)}")
    if record.locked:
        held = market.amount(record.locked)
        raise UserError(f"{held} is still held by jury seats: wait for those disputes to end")
    market.verifiers.withdraw()
    console.print(f"withdrew {market.amount(record.stake)} of verifier stake")
