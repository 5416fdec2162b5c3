"""/v1/files: upload a batch input (validated line by line), list, read and delete file objects, download
contents."""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, BinaryIO
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from client_sdk.openai_batch import FileBytes
from coordinator.api.auth import Caller
from coordinator.api.deps import AppSettings, DbSession
from coordinator.api.schemas import ERRORS, FileDeleted, FileList, FileObject
from coordinator.services import files
from coordinator.services.errors import InvalidInput
from coordinator.services.pages import page_object

router = APIRouter(prefix="/v1/files", tags=["files"], responses=ERRORS)

UPLOAD_FORM = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file", "purpose"],
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "Batch JSONL"},
                        "purpose": {"type": "string", "enum": ["batch"]},
                    },
                }
            }
        },
    }
}


@router.post(
    "", summary="Upload a batch input file (JSONL)", openapi_extra=UPLOAD_FORM, response_model=FileObject
)
async def upload(request: Request, owner: Caller) -> dict[str, Any]:
    # parsed by hand: the file part streams into a spool file (on disk past 1 MiB), then is ingested mapped
    settings = request.app.state.settings
    form = await request.form(max_files=1, max_fields=4, max_part_size=settings.max_file_bytes)
    upload_file, purpose = form.get("file"), form.get("purpose")
    if purpose != "batch":
        raise InvalidInput("purpose must be 'batch'", "purpose")
    if not isinstance(upload_file, UploadFile):
        raise InvalidInput("attach the JSONL as the multipart field 'file'", "file")
    name = (upload_file.filename or "batch.jsonl")[:255]

    def ingest() -> dict[str, Any]:
        with mapped(upload_file.file) as data, request.app.state.database.session() as db:
            record = files.ingest_batch_file(db, settings, owner, name, data, int(time.time()))
            return files.file_object(record, settings)

    return await run_in_threadpool(ingest)


@contextmanager
def mapped(spool: BinaryIO) -> Iterator[FileBytes]:
    """The spooled upload's bytes mapped from its file (read-only; nothing copied into memory), or b"" when
    it is empty (an empty file cannot be mapped)."""
    if spool.seek(0, os.SEEK_END) == 0:
        yield b""
        return
    with mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_READ) as data:
        yield data


@router.get("", summary="List your files, newest first", response_model=FileList)
def list_(
    owner: Caller,
    db: DbSession,
    settings: AppSettings,
    limit: Annotated[int, Query()] = 20,
    after: Annotated[str | None, Query(max_length=64)] = None,
    purpose: Annotated[str | None, Query(max_length=32)] = None,
) -> dict[str, Any]:
    rows, has_more = files.list_files(db, owner, limit, after, purpose)
    return page_object([files.file_object(f, settings) for f in rows], has_more)


@router.delete(
    "/{file_id}",
    summary="Delete one of your files (not while a batch still needs it)",
    response_model=FileDeleted,
)
def delete(file_id: str, owner: Caller, db: DbSession) -> dict[str, Any]:
    files.delete_file(db, owner, file_id)
    return {"id": file_id, "object": "file", "deleted": True}


@router.get("/{file_id}", summary="Retrieve one of your files", response_model=FileObject)
def retrieve(file_id: str, owner: Caller, db: DbSession, settings: AppSettings) -> dict[str, Any]:
    return files.file_object(files.get_file(db, owner, file_id), settings)


@router.get("/{file_id}/content", summary="Download a file's contents (input, output or errors)")
def content(file_id: str, owner: Caller, db: DbSession) -> StreamingResponse:
    record = files.get_file(db, owner, file_id)
    data = files.file_content(db, record)

    def chunks(size: int = 1 << 20) -> Iterator[bytes]:
        for start in range(0, len(data), size):
            yield data[start : start + size]

    return StreamingResponse(
        chunks(),
        media_type="application/jsonl",
        headers={"Content-Disposition": content_disposition(record.filename)},
    )


def content_disposition(filename: str) -> str:
    """RFC 6266: an ASCII fallback name (anything else, quotes and control characters become `_`) and the
    exact name, UTF-8 and percent-encoded, so any file name a user uploaded downloads under its own name."""
    fallback = "".join(c if " " <= c <= "~" and c not in '"\\' else "_" for c in filename) or "file"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
