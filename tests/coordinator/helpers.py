"""Batch files, and tasks funded for them, for coordinator tests."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from eth_account.signers.local import LocalAccount
from sqlalchemy.orm import Session

from client_sdk.chain.contracts import Market
from client_sdk.inputs import params_hash
from client_sdk.protocol.task import TaskPrices
from coordinator.config import Settings
from coordinator.db.models import Batch, File, FileContent, Miner, Request
from coordinator.db.session import Database
from coordinator.services import files
from tests.coordinator.conftest import MODEL_NAME

ENDPOINT = "/v1/chat/completions"


def chat_line(custom_id: str, content: str = "what is the capital of france?", **body: Any) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": 8,
            **body,
        },
    }


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def batch_file(count: int) -> bytes:
    return jsonl([chat_line(f"req-{i}", f"question number {i}?") for i in range(count)])


def padded_batch_file(count: int, padding: int = 1500) -> bytes:
    """Long lines whose prompts still fit the tiny model: each padded with `padding` bytes of JSON blanks."""
    rows = (
        json.dumps(chat_line(f"request-{i}", f"question {i}: " + "many words " * 60)) for i in range(count)
    )
    return "".join(row[:-1] + " " * padding + "}\n" for row in rows).encode()


def running_batch(session: Session, owner: str, requests: int, now: int, content: bytes = b"") -> Batch:
    """An input file (with `content` if given) and an in-progress batch over it, flushed; the request rows and
    work units are the caller's."""
    return stored_batch(session, owner, requests, now, content, status="in_progress")


def stored_batch(
    session: Session,
    owner: str,
    requests: int,
    now: int,
    content: bytes = b"",
    *,
    status: str,
    task_id: int | None = None,
) -> Batch:
    """An input file (with `content` if given) and a batch over it in `status` (for on-chain task `task_id`,
    else a random id), flushed."""
    file = File(
        id="file-" + secrets.token_hex(4),
        owner=owner,
        purpose="batch",
        filename="in.jsonl",
        bytes=len(content) or 1,
        created_at=now,
        line_count=requests,
    )
    session.add(file)
    session.flush()  # no ORM relationship orders the inserts: the batch refers to the file
    if content:
        session.add(FileContent(file_id=file.id, data=content))
    batch = Batch(
        id="batch-" + secrets.token_hex(4),
        owner=owner,
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        model=MODEL_NAME,
        completion_window="24h",
        task_id=secrets.randbelow(2**32) if task_id is None else task_id,
        status=status,
        created_at=now,
        expires_at=now + 86_400,
        in_progress_at=now if status == "in_progress" else None,
        request_total=requests,
    )
    session.add(batch)
    session.flush()
    return batch


def add_requests(
    session: Session, batch: Batch, lines: list[dict[str, Any]], prompt_tokens: int, max_tokens: int
) -> None:
    """The request rows of the batch's input `lines` (as ingestion stores them), each with these counts."""
    session.add_all(
        Request(
            file_id=batch.input_file_id,
            line_index=index,
            custom_id=line["custom_id"],
            line_hash="0x" + "00" * 32,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
        )
        for index, line in enumerate(lines)
    )


@dataclass(frozen=True)
class IngestedFile:
    """What a task for an ingested batch file names, read while its session was open."""

    id: str
    model: str
    input_root: bytes
    line_count: int
    model_hash: bytes  # of the checkpoint the settings serve as `model`


def ingested_batch_file(database: Database, settings: Settings, owner: str, count: int = 3) -> IngestedFile:
    """`batch_file(count)` ingested through the files service as `owner`'s."""
    with database.session() as session:
        file = files.ingest_batch_file(session, settings, owner, "in.jsonl", batch_file(count), 0)
        model, root, line_count, file_id = file.model, file.input_root, file.line_count, file.id
    assert model is not None and root is not None
    served = settings.model(model)
    assert served is not None
    return IngestedFile(file_id, model, bytes.fromhex(root[2:]), line_count, served.model_hash)


def funded_task(
    market: Market,
    owner: LocalAccount,
    model_hash: bytes,
    input_root: bytes,
    request_count: int,
    max_price: int,
    price_per_million: int,
    window: str = "24h",
) -> int:
    """The id of a task `owner` creates and funds (the max price minted to it first) for a chat-completions
    batch file of this model, input root and line count over `window`, at one price per million input and
    output tokens."""
    market.token.mint(owner.address, max_price)
    as_owner = market.as_account(owner)
    as_owner.token.approve(as_owner.escrow.address, max_price)
    return as_owner.tasks.create_task(
        model_id=model_hash,
        input_root=input_root,
        request_count=request_count,
        params_hash=params_hash(ENDPOINT, window),
        max_price=max_price,
        deadline=market.chain_time() + 86_400,
        prices=TaskPrices(price_per_million, price_per_million),
    )


def joined_miner(database_url: str, address: str) -> None:
    """A miner row as a join leaves it, stored straight in the database (joins are tested with a chain
    elsewhere)."""
    engine = sa.create_engine(database_url)
    with Session(engine) as session, session.begin():
        session.add(
            Miner(
                address=address, model="tiny/qwen3", endpoint="tcp://127.0.0.1:1", link_key="k" * 40,
                region="us-east-1", gpu="cpu", memory_gb=1, tflops=1, mem_bandwidth_gb_s=1,
                layer_latency_ms=1, joined_at=0,
            )
        )  # fmt: skip
    engine.dispose()
