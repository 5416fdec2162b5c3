"""The `arbitration` command: the dispute and verifier commands of the SDK plus `verify`, which needs the
model code."""

from __future__ import annotations

from client_sdk.cli import challenges
from client_sdk.cli.arbitration import (
    dispute_app,
    exit_verifier,
    leave_model,
    refute_usage,
    status,
    withdraw_stake,
)
from client_sdk.cli.support import command_group
from miner.cli.verify import verify

app = command_group("Dispute results, and verify disputes and audits.")
app.add_typer(dispute_app, name="dispute")
app.add_typer(challenges.app, name="line")
app.command("verify")(verify)
app.command("status")(status)
app.command("leave-model")(leave_model)
app.command("exit")(exit_verifier)
app.command("withdraw-stake")(withdraw_stake)
app.command("refute-usage")(refute_usage)


if __name__ == "__main__":
    app()
