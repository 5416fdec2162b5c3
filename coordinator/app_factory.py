"""The ASGI app as uvicorn builds it (`coordinator.app_factory:app`, factory=True), from the environment."""

from __future__ import annotations

from fastapi import FastAPI

from coordinator.api.app import create_app
from coordinator.chain import CoordinatorChain
from coordinator.config import Settings


def app() -> FastAPI:
    settings = Settings.from_env()
    chain = None
    if settings.rpc_url and settings.deployment_file:
        chain = CoordinatorChain.connect(settings.rpc_url, settings.deployment_file, None)
    return create_app(settings, chain)
