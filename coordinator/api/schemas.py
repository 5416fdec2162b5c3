"""The shapes the OpenAI-compatible routes answer with, for the OpenAPI schema (and checked on the way out):
OpenAI's file, batch and list objects with our extensions, and the error envelope every error answers with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ErrorBody(BaseModel):
    message: str
    type: str = Field(description="invalid_request_error, authentication_error or server_error")
    param: str | None
    code: str | None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorEnvelope, "description": "The request cannot be accepted (the message says why)"},
    401: {"model": ErrorEnvelope, "description": "No valid wallet signature (or session token, for reads)"},
    404: {"model": ErrorEnvelope, "description": "No such object of yours"},
    413: {"model": ErrorEnvelope, "description": "The body is over the size limit"},
    503: {"model": ErrorEnvelope, "description": "The database or Redis is down (see /readyz)"},
}
# the miners', verifiers' and disputes' protocol routes also answer 409 when the object's state forbids the
# call for now (their clients retry); the OpenAI-compatible routes never do, as openai-python would retry
CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorEnvelope, "description": "The object's state forbids this call for now"}
}


class FileObject(BaseModel):
    id: str
    object: str = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str = Field(description="batch (an input), batch_output or batch_error")
    request_count: int | None = Field(default=None, description="Batch inputs: lines")
    endpoint: str | None = Field(default=None, description="Batch inputs: the endpoint every line calls")
    model: str | None = Field(default=None, description="Batch inputs: the model every line names")
    model_hash: str | None = Field(
        default=None,
        description="Batch inputs: the hash of the checkpoint served as `model`, which a task names",
    )
    input_root: str | None = Field(
        default=None, description="Batch inputs: the Merkle root of the lines, which the task commits to"
    )
    input_tokens: int | None = Field(default=None, description="Batch inputs: prompt tokens of all lines")
    max_output_tokens: int | None = Field(
        default=None,
        description="Batch inputs: the lines' max_tokens added up; with input_tokens, at a task's prices, "
        "the most a task for this file can cost (its max price must cover it)",
    )


class FileList(BaseModel):
    object: str = "list"
    data: list[FileObject]
    first_id: str | None
    last_id: str | None
    has_more: bool


class FileDeleted(BaseModel):
    id: str
    object: str = "file"
    deleted: bool


class RequestCounts(BaseModel):
    total: int
    completed: int
    failed: int


class CachedTokens(BaseModel):
    cached_tokens: int


class ReasoningTokens(BaseModel):
    reasoning_tokens: int


class Usage(BaseModel):
    input_tokens: int
    input_tokens_details: CachedTokens
    output_tokens: int
    output_tokens_details: ReasoningTokens
    total_tokens: int


class BatchErrors(BaseModel):
    object: str = "list"
    data: list[dict[str, Any]]


class BatchObject(BaseModel):
    id: str
    object: str = "batch"
    endpoint: str
    model: str
    errors: BatchErrors | None
    input_file_id: str
    completion_window: str
    status: str
    output_file_id: str | None
    error_file_id: str | None
    created_at: int
    in_progress_at: int | None
    expires_at: int
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: RequestCounts
    metadata: dict[str, str] | None
    usage: Usage = Field(description="Tokens of the lines served so far (the committed usage once committed)")
    task_id: int = Field(description="The on-chain task that escrows the payment")
    results_root: str | None = Field(description="The committed results root, once committed")
    commit_tx: str | None = Field(description="The transaction that committed the results")
    status_detail: str | None = Field(description="Why the batch is waiting, when it is")


class BatchList(BaseModel):
    object: str = "list"
    data: list[BatchObject]
    first_id: str | None
    last_id: str | None
    has_more: bool
