"""/v1/prices: what this coordinator asks per million tokens. A task must pay at least this (its prices are
fixed on-chain when the owner creates it); the SDK reads it to price a new task when the user names none."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from coordinator.api.deps import AppSettings
from coordinator.api.schemas import ERRORS

router = APIRouter(prefix="/v1/prices", tags=["batches"], responses=ERRORS)


class Prices(BaseModel):
    input_per_million: int
    output_per_million: int


@router.get("", summary="The least a task must pay per million input and output tokens (token base units)")
def asking_prices(settings: AppSettings) -> Prices:
    price = settings.price_per_million_tokens
    return Prices(input_per_million=price, output_per_million=price)
