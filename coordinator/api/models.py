"""/v1/models: the models this coordinator serves, as OpenAI's API lists them (openai-python's
`client.models.list()`), each with the hash of its weights, the model id a task names on-chain."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from coordinator.api.deps import AppSettings
from coordinator.api.schemas import ERRORS

router = APIRouter(prefix="/v1/models", tags=["batches"], responses=ERRORS)


class Model(BaseModel):
    id: str = Field(description="The name request lines give as `model`")
    object: Literal["model"] = "model"
    created: int = Field(default=0, description="Unknown here: 0")
    owned_by: str = Field(default="batchmarket")
    model_hash: str = Field(description="The hash of the served weights (0x-hex): a task's on-chain model id")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]


@router.get("", summary="The models served here, with the hash a task names each by on-chain")
def list_models(settings: AppSettings) -> ModelList:
    return ModelList(data=[Model(id=m.name, model_hash="0x" + m.model_hash.hex()) for m in settings.models])
