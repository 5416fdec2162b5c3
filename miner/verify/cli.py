"""The `arbitration` command: the dispute commands of the SDK plus `verify`, which needs the model code."""

from __future__ import annotations

import typer

from client_sdk.arbitration_cli import dispute_app
from miner.verify.command import verify

app = typer.Typer(
    help="Dispute results, and verify disputes and audits.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(dispute_app, name="dispute")
app.command("verify")(verify)


if __name__ == "__main__":
    app()
