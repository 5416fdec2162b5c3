"""The installed commands (`market`, `miner`, `coordinator`, `arbitration`). Each loads its command line; on
the slim install (the package without its `full` extra: the signing client alone) it says in one line what
to install instead of failing on an import."""

from __future__ import annotations

import importlib
import sys

OUR_PACKAGES = ("client_sdk", "coordinator", "miner")
FULL_INSTALL = "pip install 'batchmarket[full]'"


def _run(command: str, module: str) -> None:
    try:
        app = importlib.import_module(module).app
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] in OUR_PACKAGES:
            raise  # our own module missing is a broken checkout, not a slim install
        sys.exit(
            f"{command}: this install is the signing client alone ({missing.name} is missing): {FULL_INSTALL}"
        )
    app()


def market() -> None:
    _run("market", "client_sdk.cli.market")


def miner() -> None:
    _run("miner", "miner.cli.app")


def coordinator() -> None:
    _run("coordinator", "coordinator.cli.app")


def arbitration() -> None:
    _run("arbitration", "miner.cli.arbitration")
