"""Every command's --help reads at 80 columns: each environment variable an option reads is shown whole (rich
used to cut them mid-name), and no help text is missing."""

from __future__ import annotations

import click
import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from client_sdk.cli.market import app as market_app
from coordinator.cli.app import app as coordinator_app
from miner.cli.app import app as miner_app
from miner.cli.arbitration import app as arbitration_app

APPS = {
    "market": market_app,
    "miner": miner_app,
    "arbitration": arbitration_app,
    "coordinator": coordinator_app,
}


def commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, group)]
    # typer's groups are not click.Group subclasses in every typer release: any command with subcommands
    for name, command in getattr(group, "commands", {}).items():
        found += commands(command, (*path, name))
    return found


@pytest.mark.parametrize("name", sorted(APPS))
def test_every_help_shows_its_environment_variables_whole_at_80_columns(name: str) -> None:
    app: typer.Typer = APPS[name]
    for path, command in commands(get_command(app)):
        shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
        assert shown.exit_code == 0, (path, shown.output)
        described = command.help or command.short_help or hasattr(command, "commands")
        assert described, f"{name} {' '.join(path)}: no help"
        for parameter in command.params:
            names = parameter.envvar if isinstance(parameter.envvar, list) else [parameter.envvar]
            for variable in filter(None, names):
                assert variable in shown.stdout, f"{name} {' '.join(path)}: {variable} is cut or missing"
        assert max(map(len, shown.stdout.splitlines())) <= 80, f"{name} {' '.join(path)}: wider than 80"


def test_every_command_is_reached() -> None:
    """The walk above sees the subcommands, not only each app's top level."""
    reached = {" ".join(path) for path, _ in commands(get_command(APPS["miner"]))}
    assert {"serve", "relay", "stake withdraw", "run-local"} <= reached
