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
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, validates

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
    # input files only: the lines' max_tokens added up, the most output a task for the file can be billed
    max_output_tokens: Mapped[int | None] = mapped_column(BigInteger)


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
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON(none_as_null=True))
    task_id: Mapped[int] = mapped_column(BigInteger)
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
    errors: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON(none_as_null=True))
    request_total: Mapped[int] = mapped_column(Integer)
    # results stored so far, counted as they are stored (a status poll reads them instead of counting rows)
    completed_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    failed_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    results_root: Mapped[str | None] = mapped_column(HASH)
    commit_tx: Mapped[str | None] = mapped_column(HASH)
    # set when the batch is assigned on-chain, and at commit
    miners: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    # assigned miners the batch left out: they revoked the signer they accepted the task with, or did not sign
    # its results in time; no line of the batch is routed to a pipeline that has one, and the planner leaves
    # them out while the batch runs
    left_out_miners: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    # why the batch is where it is while it waits (no miner can hold the model, miners yet to accept), or None
    status_detail: Mapped[str | None] = mapped_column(Text)
    # the assignment offered to miners and waiting for their acceptances: {"miners", "stake_lock", "expiry"}
    proposal: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    commitment: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    # the server default is migration 0002's, which added the column to existing rows
    finalized: Mapped[bool] = mapped_column(default=False, server_default=false())

    __table_args__ = (
        Index("ix_batches_owner_created", "owner", "created_at"),
        Index("ix_batches_created_at", "created_at"),  # the explorer's count of the last day's batches
        # a results file's batch, looked up before its content is read (or the file deleted)
        Index("ix_batches_output_file_id", "output_file_id"),
        Index("ix_batches_error_file_id", "error_file_id"),
        # one live batch per task; a failed one (the owner's own, refused by the worker) frees the task id
        Index(
            "uq_batches_live_task",
            "task_id",
            unique=True,
            postgresql_where=text("status <> 'failed'"),
            sqlite_where=text("status <> 'failed'"),
        ),
    )


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
    stage_layers: Mapped[list[int] | None] = mapped_column(
        JSON(none_as_null=True)
    )  # layers each pipeline miner ran (pay share)
    created_at: Mapped[int] = mapped_column(BigInteger)

    # the explorer's throughput chart reads the last half hour's results by time
    __table_args__ = (Index("ix_results_created_at", "created_at"),)


class Miner(Base):
    """A miner that joined this coordinator (its on-chain registration was checked at join)."""

    __tablename__ = "miners"

    address: Mapped[str] = mapped_column(ADDRESS, primary_key=True)
    model: Mapped[str] = mapped_column(String(255), index=True)
    endpoint: Mapped[str] = mapped_column(String(255))
    # the public CURVE key of its stage links (Z85), bound to the miner by its wallet-signed join
    link_key: Mapped[str | None] = mapped_column(String(40))
    region: Mapped[str] = mapped_column(String(64))
    gpu: Mapped[str] = mapped_column(String(64))
    memory_gb: Mapped[float]
    tflops: Mapped[float]
    mem_bandwidth_gb_s: Mapped[float]
    layer_latency_ms: Mapped[float]
    joined_at: Mapped[int] = mapped_column(BigInteger)
    # its node's latest join: a node joins when it starts, and a restarted node has lost what it served
    session_started_at: Mapped[int | None] = mapped_column(BigInteger)
    # whether the coordinator could open a TCP connection to its endpoint at its latest probe, and when
    reachable: Mapped[bool] = mapped_column(default=True, server_default=true())
    probed_at: Mapped[int | None] = mapped_column(BigInteger)
    # the relay its peers send through when it accepts no inbound connection (behind NAT); None: direct
    relay_endpoint: Mapped[str | None] = mapped_column(String(255))
    relay_key: Mapped[str | None] = mapped_column(String(40))
    relay_region: Mapped[str | None] = mapped_column(String(64))

    @property
    def can_be_reached(self) -> bool:
        """Its peers can send to it: directly, or through its relay."""
        return self.reachable or self.relay_endpoint is not None


class PipelineRecord(Base):
    """One pipeline of a plan: stages [{"miner", "start", "end"}], first stage first. Plans are replaced
    whole (a new version) when membership changes; old pipelines stay for the units they already hold."""

    __tablename__ = "pipelines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(String(255), index=True)
    version: Mapped[int] = mapped_column(Integer)
    stages: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    members: Mapped[list[str]] = mapped_column(JSON)  # the live miners this plan version was made from
    active: Mapped[bool]
    # microbatches every stage keeps in flight (DeServe's rule over the plan's stage times and links);
    # None for pipelines planned before it was recorded: one per stage
    microbatches: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[int] = mapped_column(BigInteger)

    # the stages' miners again, one row each, indexed by miner: a miner's pipelines are found without reading
    # every plan ever made; written with `stages` (below), never on their own
    stage_rows: Mapped[list[PipelineStage]] = relationship(
        cascade="all, delete-orphan", order_by="PipelineStage.position"
    )

    @validates("stages")
    def _index_stages(self, _key: str, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        self.stage_rows = [PipelineStage(position=i, miner=str(s["miner"])) for i, s in enumerate(stages)]
        return stages

    @property
    def head(self) -> str:
        """The first stage's miner: it claims the pipeline's work units."""
        return str(self.stages[0]["miner"])

    @property
    def miners(self) -> list[str]:
        return [str(stage["miner"]) for stage in self.stages]


class PipelineStage(Base):
    """Which miner runs a pipeline's stage at `position` (0: the head)."""

    __tablename__ = "pipeline_stages"

    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipelines.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    miner: Mapped[str] = mapped_column(ADDRESS)

    __table_args__ = (Index("ix_pipeline_stages_miner", "miner", "position"),)


class WorkUnit(Base):
    """A slice of a batch sent to one pipeline's head. `leased_until` passes when the head goes silent; the
    worker then gives the unit to another pipeline, whose head resumes each line from `partial_outputs`: the
    output tokens so far that the unit's leaseholder heads last reported, by line index (a string, as JSON
    keys are), until the unit is done."""

    __tablename__ = "work_units"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"), index=True)
    line_indices: Mapped[list[int]] = mapped_column(JSON)
    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipelines.id"), index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)  # queued | leased | done
    attempts: Mapped[int] = mapped_column(Integer)
    leased_until: Mapped[int | None] = mapped_column(BigInteger)
    leased_at: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)
    partial_outputs: Mapped[dict[str, list[int]] | None] = mapped_column(JSON(none_as_null=True))


class Signature(Base):
    """A miner's EIP-712 signature over a batch's result commitment."""

    __tablename__ = "signatures"

    batch_id: Mapped[str] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    miner: Mapped[str] = mapped_column(ADDRESS, primary_key=True)
    signature: Mapped[str] = mapped_column(String(132))
    created_at: Mapped[int] = mapped_column(BigInteger)


class Acceptance(Base):
    """A miner's EIP-712 consent to the stake lock of a batch's proposed assignment."""

    __tablename__ = "acceptances"

    batch_id: Mapped[str] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True)
    miner: Mapped[str] = mapped_column(ADDRESS, primary_key=True)
    expiry: Mapped[int] = mapped_column(BigInteger)
    signature: Mapped[str] = mapped_column(String(132))
    created_at: Mapped[int] = mapped_column(BigInteger)


class DisputeEvidence(Base):
    """The request line and result line a dispute is about, published once by its challenger for the
    verifiers; stored only after the result line hashed to the leaf the dispute holds on-chain and the request
    line proved to be the task's input line at its position (canonical JSON)."""

    __tablename__ = "dispute_evidence"

    dispute_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    task_id: Mapped[int] = mapped_column(BigInteger, index=True)
    challenger: Mapped[str] = mapped_column(ADDRESS)
    leaf_hash: Mapped[str] = mapped_column(HASH)
    request_line: Mapped[str] = mapped_column(Text)
    result_line: Mapped[str] = mapped_column(Text)  # with its x_batchmarket proof fields
    # the request line's proof in the task's input tree (hex words)
    input_proof: Mapped[list[str] | None] = mapped_column(JSON)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[int] = mapped_column(BigInteger)
