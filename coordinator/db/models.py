"""Tables. Times are unix seconds (UTC); addresses are checksummed; hashes are 0x-prefixed hex.

Large payloads (file contents) live in their own table so listing files or batches never loads them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ADDRESS = String(42)
HASH = String(66)


class Base(DeclarativeBase):
    pass


class File(Base):
    __tablename__ = "files"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str] = mapped_column(ADDRESS, index=True)
    purpose: Mapped[str] = mapped_column(String(16))  # batch | batch_output | batch_error
    filename: Mapped[str] = mapped_column(String(255))
    bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)
    line_count: Mapped[int] = mapped_column(Integer)
    # input files only: what every line shares, and the Merkle root the on-chain task must commit to
    endpoint: Mapped[str | None] = mapped_column(String(64))
    model: Mapped[str | None] = mapped_column(String(255))
    input_root: Mapped[str | None] = mapped_column(HASH)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)


class FileContent(Base):
    __tablename__ = "file_contents"

    file_id: Mapped[str] = mapped_column(ForeignKey("files.id", ondelete="CASCADE"), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Request(Base):
    """One line of an input file, parsed: what a miner needs to serve it and what a leaf commits to."""

    __tablename__ = "requests"
    __table_args__ = (
        UniqueConstraint("file_id", "line_index"),
        UniqueConstraint("file_id", "custom_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    file_id: Mapped[str] = mapped_column(ForeignKey("files.id", ondelete="CASCADE"), index=True)
    line_index: Mapped[int] = mapped_column(Integer)
    custom_id: Mapped[str] = mapped_column(String(512))
    line_hash: Mapped[str] = mapped_column(HASH)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    max_tokens: Mapped[int] = mapped_column(Integer)


class Batch(Base):
    __tablename__ = "batches"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner: Mapped[str] = mapped_column(ADDRESS, index=True)
    input_file_id: Mapped[str] = mapped_column(ForeignKey("files.id"))
    endpoint: Mapped[str] = mapped_column(String(64))
    model: Mapped[str] = mapped_column(String(255))
    completion_window: Mapped[str] = mapped_column(String(16))
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    task_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    created_at: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[int] = mapped_column(BigInteger)
    in_progress_at: Mapped[int | None] = mapped_column(BigInteger)
    finalizing_at: Mapped[int | None] = mapped_column(BigInteger)
    completed_at: Mapped[int | None] = mapped_column(BigInteger)
    failed_at: Mapped[int | None] = mapped_column(BigInteger)
    expired_at: Mapped[int | None] = mapped_column(BigInteger)
    cancelling_at: Mapped[int | None] = mapped_column(BigInteger)
    cancelled_at: Mapped[int | None] = mapped_column(BigInteger)
    output_file_id: Mapped[str | None] = mapped_column(String(40))
    error_file_id: Mapped[str | None] = mapped_column(String(40))
    errors: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    request_total: Mapped[int] = mapped_column(Integer)
    results_root: Mapped[str | None] = mapped_column(HASH)
    commit_tx: Mapped[str | None] = mapped_column(HASH)

    __table_args__ = (Index("ix_batches_owner_created", "owner", "created_at"),)


class Result(Base):
    """A request's result, stored exactly once whatever retries happen (the primary key sees to it)."""

    __tablename__ = "results"

    batch_id: Mapped[str] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    line_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    custom_id: Mapped[str] = mapped_column(String(512))
    ok: Mapped[bool]
    body: Mapped[str] = mapped_column(Text)  # the output (or error) line's response body, canonical JSON
    output_hash: Mapped[str] = mapped_column(HASH)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    pipeline: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[int] = mapped_column(BigInteger)
