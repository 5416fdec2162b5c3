"""What every batchmarket CLI shares: connection options, key loading and one-line errors."""

from __future__ import annotations

import functools
import inspect
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import requests
import typer
import typer.rich_utils
from eth_account.signers.local import LocalAccount
from rich.console import Console
from rich.table import Table

from client_sdk.chain.contracts import Market, connect
from client_sdk.client import Client
from client_sdk.errors import UserError
from client_sdk.keys import load_account
from client_sdk.protocol.constants import stage_dtype
from client_sdk.protocol.model_identity import checkpoint_config

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

DEFAULT_RPC_URL = "http://127.0.0.1:8545"
DEFAULT_DEPLOYMENT = Path("deployment.json")
DEFAULT_COORDINATOR = "http://127.0.0.1:8000"

console = Console()
error_console = Console(stderr=True)

# An option's allowed range goes under its type in --help, not beside it: beside, it widens the type column of
# every option until, at 80 columns, the help column is too narrow for an environment variable's name.
typer.rich_utils.RANGE_STRING = "\n[{}]"

CoordinatorOption = Annotated[
    str,
    typer.Option("--coordinator", envvar="BATCHMARKET_COORDINATOR_URL", help="Coordinator API URL."),
]


def _read_by(check: Callable[[T], object]) -> Callable[[T], T]:
    """A typer callback: the option's value once `check` passes it, its UserError a usage error. An option
    with one is checked as the command line is read, before a key is loaded or anything connects."""

    def callback(value: T) -> T:
        try:
            check(value)
        except UserError as exc:
            raise typer.BadParameter(str(exc)) from None
        return value

    return callback


ModelDirOption = Annotated[
    Path,
    typer.Option(
        "--model-dir",
        help="Checkpoint directory: config.json, safetensors, tokenizer.",
        callback=_read_by(checkpoint_config),
    ),
]
DeviceOption = Annotated[str, typer.Option("--device", help="Torch device: cpu, cuda or cuda:N.")]
DtypeOption = Annotated[
    str,
    typer.Option(
        "--dtype",
        help="Weights and activations: float32, bfloat16 or float16.",
        callback=_read_by(stage_dtype),
    ),
]
RpcUrlOption = Annotated[
    str, typer.Option("--rpc-url", envvar="BATCHMARKET_RPC_URL", help="JSON-RPC endpoint of the chain.")
]
DeploymentOption = Annotated[
    Path,
    typer.Option(
        "--deployment",
        envvar="BATCHMARKET_DEPLOYMENT",
        help="Deployment file with the contract addresses (written by `coordinator deploy`).",
    ),
]
KeystoreOption = Annotated[
    Path | None,
    typer.Option(
        "--keystore",
        envvar="BATCHMARKET_KEYSTORE",
        help="Encrypted keystore file (password from BATCHMARKET_KEYSTORE_PASSWORD or a prompt). "
        "Without it, the key comes from BATCHMARKET_PRIVATE_KEY.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def command_group(help: str) -> typer.Typer:
    """A command or group of subcommands: bare, it shows its help; an unexpected error prints without typer's
    pretty traceback (which shows local variables, keys included)."""
    return typer.Typer(help=help, no_args_is_help=True, pretty_exceptions_enable=False)


def show_report(report: dict[str, Any], title: str, as_json: bool) -> None:
    """A report as JSON, or for people as a two-column table (a list one item per line, nothing as "-")."""
    if as_json:
        console.print_json(json.dumps(report))
        return
    table = Table(title=title, show_header=False)
    for key, value in report.items():
        shown = "\n".join(map(str, value)) if isinstance(value, list) else str(value)
        table.add_row(key.replace("_", " "), "-" if value is None else shown)
    console.print(table)


def log_to_console() -> None:
    """For a command that runs until stopped: log lines at INFO with the time and the logger's name (without
    httpx's line for every request, which would drown them)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)


def say(text: str, on: Console = console) -> None:
    """Prints `text` as written: no markup (a key's Z85 alphabet has brackets, which rich would take for
    styles and drop), no highlighting, no wrapping."""
    on.print(text, markup=False, highlight=False, soft_wrap=True)


def one_line_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Prints a UserError (or a dropped RPC connection) as `error: ...` and exits 1, without a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except UserError as exc:
            say(f"error: {exc}", error_console)
        except requests.exceptions.ConnectionError:
            error_console.print("error: lost the connection to the RPC endpoint", markup=False)
        sys.exit(1)

    return wrapper


def _option(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


CHAIN_OPTIONS = (
    _option("rpc_url", DEFAULT_RPC_URL, RpcUrlOption),
    _option("deployment", DEFAULT_DEPLOYMENT, DeploymentOption),
)
KEYSTORE_OPTION = _option("keystore", None, KeystoreOption)
COORDINATOR_OPTION = _option("coordinator", DEFAULT_COORDINATOR, CoordinatorOption)
Command = Callable[..., None]


def on_chain(*, signing: bool) -> Callable[[Command], Command]:
    """A command that works on the deployment: it declares `market: Market` and gets --rpc-url and
    --deployment (and --keystore when it is `signing`) before its --json, and is called with the market they
    connect to (holding the caller's key when `signing`); its errors print as one line (one_line_errors)."""

    def market(rpc_url: str, deployment: Path, keystore: Path | None = None) -> Market:
        return open_market(rpc_url, deployment, keystore, signing=signing)

    return _injecting("market", market, (*CHAIN_OPTIONS, KEYSTORE_OPTION) if signing else CHAIN_OPTIONS)


def with_client(command: Command) -> Command:
    """A command that talks to a coordinator as the caller: it declares `client: Client` and gets
    --coordinator, --rpc-url, --deployment and --keystore before its --json, and is called with the client
    they make (the caller's key loaded); its errors print as one line (one_line_errors)."""

    return _injecting("client", open_client, (COORDINATOR_OPTION, *CHAIN_OPTIONS, KEYSTORE_OPTION))(command)


def _injecting(
    name: str, make: Callable[..., Any], options: tuple[inspect.Parameter, ...]
) -> Callable[[Command], Command]:
    """A decorator: the command's parameter `name` leaves its signature (what typer reads) and `options` join
    it before --json; at each call, `make` turns the options' values into that argument."""

    def decorate(command: Command) -> Command:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != name]
        at = next((i for i, p in enumerate(own) if p.name == "as_json"), len(own))

        @functools.wraps(command)
        def run(**values: Any) -> None:
            made = make(**{option.name: values.pop(option.name) for option in options})
            command(**{name: made}, **values)

        parameters = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in (*own[:at], *options, *own[at:])
        ]
        run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]  # what typer reads
        return one_line_errors(run)

    return decorate


def open_market(rpc_url: str, deployment: Path, keystore: Path | None, *, signing: bool) -> Market:
    """Connects to the deployment; with `signing`, loads the caller's key first (so a missing key is reported
    before any network traffic)."""
    account = load_cli_account(keystore) if signing else None
    return connect(rpc_url, deployment, account)


def open_client(coordinator: str, rpc_url: str, deployment: Path, keystore: Path | None) -> Client:
    """A client of the coordinator and the deployment, signing with the caller's key."""
    return Client(coordinator, key=load_cli_account(keystore), rpc_url=rpc_url, deployment=deployment)


def load_cli_account(keystore: Path | None) -> LocalAccount:
    """The caller's key: a keystore (password from the environment or a prompt), else
    BATCHMARKET_PRIVATE_KEY."""
    return load_account(keystore, ask_password=ask_password)


def ask_password() -> str:
    """Asks for a keystore's password at the terminal, unechoed."""
    password: str = typer.prompt("Keystore password", hide_input=True)
    return password
