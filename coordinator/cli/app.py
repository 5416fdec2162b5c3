"""`coordinator`: operator commands: deploy the market contracts, plan a cluster, simulate a plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from client_sdk.chain.deploy import DeployParams, deploy
from client_sdk.cli.support import (
    DEFAULT_DEPLOYMENT,
    DEFAULT_RPC_URL,
    JsonOption,
    KeystoreOption,
    RpcUrlOption,
    command_group,
    console,
    error_console,
    one_line_errors,
)
from client_sdk.errors import UserError
from client_sdk.keys import load_account
from client_sdk.units import parse_amount
from coordinator.cli import services as service_cli
from coordinator.scheduling.cluster import Cluster
from coordinator.scheduling.errors import SchedulingError
from coordinator.scheduling.metrics import plan_metrics
from coordinator.scheduling.model import DEFAULT_KV_RESERVE, ModelSpec
from coordinator.scheduling.plan import Plan
from coordinator.scheduling.strategies import STRATEGIES, make_plan
from coordinator.simulate.engine import simulate
from coordinator.simulate.workload import Workload
from miner.cli import relay as relay_command  # the same relay a miner may run

app = command_group("Operate a batchmarket coordinator.")


@app.callback()
def main() -> None:
    """Operate a batchmarket coordinator."""


app.add_typer(service_cli.db_app, name="db")
app.command("serve")(one_line_errors(service_cli.serve))
app.command("worker")(one_line_errors(service_cli.worker))
app.command("relay")(one_line_errors(relay_command.relay))


@app.command("deploy")
@one_line_errors
def deploy_command(
    out: Annotated[Path, typer.Option(help="Where to write the deployment file.")] = DEFAULT_DEPLOYMENT,
    coordinator: Annotated[
        str | None, typer.Option(help="Coordinator address (default: the deployer).")
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Existing payment token (default: deploy a mock).")
    ] = None,
    min_stake: Annotated[str, typer.Option(help="Minimum miner stake, in tokens.")] = "100",
    challenge_window: Annotated[int, typer.Option(help="Seconds to dispute committed results.")] = 86_400,
    voting_period: Annotated[
        int,
        typer.Option(help="Seconds of each dispute phase (jury draw, commit, reveal, appeal); 60 to 86,400."),
    ] = 43_200,
    unbonding_period: Annotated[
        int,
        typer.Option(
            help="Seconds before unstaked tokens can leave; must exceed the window plus 24 voting periods "
            "(an audit and a dispute, three rounds of four phases each)."
        ),
    ] = 14 * 86_400,
    audit_rate_bps: Annotated[
        int, typer.Option(help="Share of committed tasks audited, in basis points (fixed per task).")
    ] = 1_000,
    timelock_delay: Annotated[
        int, typer.Option(help="Seconds every admin change waits in the timelock before it can run.")
    ] = 2 * 86_400,
    fee_bps: Annotated[int, typer.Option(help="Coordinator fee in basis points of each payment.")] = 500,
    rpc_url: RpcUrlOption = DEFAULT_RPC_URL,
    keystore: KeystoreOption = None,
) -> None:
    """Deploy token, GPU registry, escrow, task registry, verifier registry and arbitration with roles wired,
    the admin roles handed to a timelock."""
    account = load_account(keystore)
    params = DeployParams(
        coordinator=coordinator,
        token=token,
        min_stake=parse_amount(min_stake),
        challenge_window=challenge_window,
        voting_period=voting_period,
        unbonding_period=unbonding_period,
        coordinator_fee_bps=fee_bps,
        audit_rate_bps=audit_rate_bps,
        timelock_delay=timelock_delay,
    )
    result = deploy(rpc_url, "0x" + account.key.hex(), out, params)
    console.print(f"deployed on chain {result.chain_id} at block {result.block}; wrote {out}")


ClusterOption = Annotated[
    Path, typer.Option("--cluster", help="Cluster file (JSON: gpus and optional rtt_ms).")
]
ModelOption = Annotated[
    Path, typer.Option("--model-config", help="The model's Hugging Face config.json (a file).")
]
StrategyOption = Annotated[str, typer.Option("--strategy", help=f"One of: {', '.join(STRATEGIES)}.")]
DtypeOption = Annotated[
    str | None,
    typer.Option("--dtype", help="Weight dtype (default: the config's torch_dtype, else bfloat16)."),
]
KvReserveOption = Annotated[
    float, typer.Option("--kv-reserve", help="Share of each GPU's memory kept for KV cache and runtime.")
]


@app.command("plan")
@one_line_errors
def plan_command(
    cluster: ClusterOption,
    model: ModelOption,
    strategy: StrategyOption = "parallax",
    dtype: DtypeOption = None,
    kv_reserve: KvReserveOption = DEFAULT_KV_RESERVE,
    as_json: JsonOption = False,
) -> None:
    """Place the model's layers on the cluster's GPUs with a strategy and print the plan."""
    cluster_spec, model_spec, plan = _plan(cluster, model, strategy, dtype, kv_reserve)
    payload = plan.to_json(plan_metrics(plan, cluster_spec, model_spec))
    if as_json:
        console.print_json(json.dumps(payload))
        return
    table = Table(title=f"{strategy}: {len(plan.pipelines)} pipelines for {model_spec.name}")
    table.add_column("pipeline", justify="right")
    table.add_column("stages (gpu: layers)")
    for i, pipeline in enumerate(plan.pipelines):
        table.add_row(str(i), ", ".join(f"{s.gpu}: [{s.start}, {s.end})" for s in pipeline.stages))
    if plan.extra:
        table.add_row("extra", ", ".join(f"{s.gpu}: [{s.start}, {s.end})" for s in plan.extra))
    console.print(table)
    metrics = payload["metrics"]
    tpot = metrics["tpot_ms"]["mean"]
    console.print(
        f"{metrics['gpus_used']} of {metrics['gpus']} GPUs used; TPOT alone {tpot:.1f} ms (mean); "
        f"about {metrics['decode_tokens_s']:,.0f} decode tokens/s; routing {plan.routing}"
    )


@app.command("simulate")
@one_line_errors
def simulate_command(
    cluster: ClusterOption,
    model: ModelOption,
    strategy: StrategyOption = "parallax",
    workload: Annotated[
        Path | None, typer.Option("--workload", help="Workload file (JSON: requests, prompt_tokens, ...).")
    ] = None,
    dtype: DtypeOption = None,
    kv_reserve: KvReserveOption = DEFAULT_KV_RESERVE,
    as_json: JsonOption = False,
) -> None:
    """Serve an offline workload on the cluster under a strategy's plan, in a deterministic simulation."""
    cluster_spec, model_spec, plan = _plan(cluster, model, strategy, dtype, kv_reserve)
    try:
        spec = Workload.from_dict(_read_json(workload, "--workload")) if workload else Workload()
        pipelines = len(plan.pipelines)
        with error_console.status(f"simulating {spec.requests:,} requests on {pipelines} pipelines"):
            result = simulate(plan, cluster_spec, model_spec, spec)
    except SchedulingError as err:
        raise UserError(str(err)) from None
    report = {"strategy": strategy, **result.to_json()}
    if as_json:
        console.print_json(json.dumps(report))
        return
    console.print(
        f"{strategy}: {result.completed}/{result.requests} requests, "
        f"{result.throughput_tokens_s:,.0f} tokens/s (steady), latency p50 {result.latency_p50_s:.1f} s, "
        f"p99 {result.latency_p99_s:.1f} s, GPU utilization {result.gpu_utilization:.0%}"
    )


def _plan(
    cluster: Path, model: Path, strategy: str, dtype: str | None, kv_reserve: float
) -> tuple[Cluster, ModelSpec, Plan]:
    """Reads and validates the inputs and makes the plan; every problem becomes a one-line UserError."""
    if not 0.0 <= kv_reserve < 1.0:
        raise UserError(f"--kv-reserve: must be in [0, 1), got {kv_reserve:g}")
    try:
        cluster_spec = Cluster.from_dict(_read_json(cluster, "--cluster"))
        model_spec = ModelSpec.from_hf_config(
            _read_json(model, "--model-config"), dtype, name=model.parent.name or "model"
        )
        plan = make_plan(strategy, cluster_spec, model_spec, kv_reserve)
    except SchedulingError as err:
        raise UserError(str(err)) from None
    return cluster_spec, model_spec, plan


def _read_json(path: Path, option: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise UserError(f"{option}: cannot read {path}: {err.strerror or err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(
            f"{option}: {path} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None
