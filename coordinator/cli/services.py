"""`coordinator serve`, `coordinator worker` and `coordinator db upgrade`: running the service by hand.

All three read the same environment (see coordinator.config.Settings.from_env): BATCHMARKET_DATABASE_URL,
BATCHMARKET_REDIS_URL, BATCHMARKET_MODELS, BATCHMARKET_RPC_URL, BATCHMARKET_DEPLOYMENT, and for the worker
the coordinator's key (BATCHMARKET_PRIVATE_KEY or --keystore)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from client_sdk.cli.support import command_group, console, one_line_errors
from client_sdk.errors import UserError
from coordinator.config import Settings

db_app = command_group("Database schema (Alembic migrations).")

# How long the supervisor of several HTTP workers waits for a worker's answer to its ping before it kills and
# restarts it (uvicorn's default: 5 s). A worker still importing the app on a machine whose cores are busy may
# answer later: on two cores shared with the whole test suite, an API of two workers restarted its workers in
# a loop and never came up (the likely cause, not yet confirmed by a run with this setting).
WORKER_HEALTHCHECK_S = 30
# A node's connection stays open between its heartbeats (every 5 s; uvicorn's default keep-alive is also 5 s,
# so a connection could close between two beats and the next one pay a new connect).
KEEP_ALIVE_S = 15
# On a stop, requests still running after this are cut: the nodes' waits for news (coordinator.api.wakes, up
# to 30 s) would otherwise hold the restart of an API that long; a node waiting asks again.
GRACEFUL_SHUTDOWN_S = 3


@db_app.command("upgrade")
@one_line_errors
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Create or migrate the database at BATCHMARKET_DATABASE_URL (default: sqlite:///coordinator.db)."""
    from sqlalchemy.exc import OperationalError

    from coordinator.db.migrate import upgrade

    settings = Settings.from_env()
    try:
        upgrade(settings.database_url, revision)
    except OperationalError as exc:
        raise UserError(f"cannot migrate {settings.database_url}: {exc.orig}") from exc
    console.print(f"database at {settings.database_url} is at revision {revision}")


def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="HTTP worker processes (default: one per CPU core; 200 pollers need two for p99 < 50 ms).",
        ),
    ] = os.cpu_count() or 1,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs)."""
    import uvicorn

    Settings.from_env()  # fail here, in one line, on a bad environment
    uvicorn.run(
        "coordinator.app_factory:app",
        host=host,
        port=port,
        workers=workers,
        factory=True,
        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
        timeout_keep_alive=KEEP_ALIVE_S,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )


def worker(
    concurrency: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
    beat: Annotated[
        bool, typer.Option(help="Also run the periodic sweep (exactly one worker of a deployment should).")
    ] = True,
    sweep_s: Annotated[float, typer.Option(min=0.1, help="Seconds between sweeps.")] = 2.0,
) -> None:
    """Run a Celery worker that moves batches through their lifecycle."""
    from coordinator.worker import make_celery, runtime

    settings = Settings.from_env()
    if settings.rpc_url is None or settings.deployment_file is None:
        raise UserError("set BATCHMARKET_RPC_URL and BATCHMARKET_DEPLOYMENT for the worker")
    runtime()  # connect now, so a bad key or chain fails before the worker starts
    app = make_celery(settings.redis_url, sweep_s)
    args = ["worker", f"--concurrency={concurrency}", "--loglevel=INFO", "--pool=prefork"]
    if beat:
        args += [
            "--beat",
            f"--schedule={os.environ.get('BATCHMARKET_BEAT_SCHEDULE', '.celerybeat-schedule')}",
        ]
    app.worker_main(args)
