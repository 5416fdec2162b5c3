"""The `arbitration` command: the dispute and verifier commands of the SDK plus `verify`, which needs the
model code."""

from __future__ import annotations

import typer

from client_sdk.cli.arbitration import dispute_app, exit_verifier, refute_usage, status, withdraw_stake
from miner.cli.verify import verify

app = typer.Typer(
    help="Dispute results, and verify disputes and audits.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(dispute_app, name="dispute")
app.command("verify")(verify)
app.command("status")(status)
app.command("exit")(exit_verifier)
app.command("withdraw-stake")(withdraw_stake)
app.command("refute-usage")(refute_usage)


if __name__ == "__main__":
    app()
