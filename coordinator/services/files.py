"""Files: ingest a batch input (parse, check against the served model, hash into the input Merkle tree, store
line by line), and read files back."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from client_sdk import openai_batch
from client_sdk.inputs import input_leaf, line_hash
from client_sdk.merkle import MerkleTree
from coordinator.config import Settings
from coordinator.db.models import Batch, File, FileContent, Request
from coordinator.services.errors import InvalidInput, NotFound, TooLarge
from coordinator.services.ids import new_id
from coordinator.services.pages import newest_first

Prompt = str | tuple[int, ...]  # rendered text, or token ids given as such


INGEST_CHUNK_LINES = 4096  # lines parsed, tokenized, hashed and stored together


def ingest_batch_file(
    session: Session, settings: Settings, owner: str, filename: str, data: openai_batch.FileBytes, now: int
) -> File:
    """Validates every line and stores the file with its requests; raises InvalidInput naming the first bad
    line (nothing is stored then: the caller's transaction is rolled back).

    The file is read in chunks of INGEST_CHUNK_LINES lines, each parsed, tokenized, hashed and inserted before
    the next is read, so what ingest holds beyond the file itself (in memory, or mapped from the upload's
    spool file) and its stored rows is one chunk, whatever the file's size."""
    if len(data) > settings.max_file_bytes:
        raise TooLarge(f"the file is over the limit of {settings.max_file_bytes} bytes", "file_too_large")
    record = File(id=new_id("file-"), owner=owner, purpose="batch", filename=filename, bytes=len(data))
    record.created_at, record.line_count, record.input_tokens, record.max_output_tokens = now, 0, 0, 0
    leaves: list[bytes] = []
    try:
        chunks = _chunks(openai_batch.iter_batch(data, max_lines=settings.max_file_lines), INGEST_CHUNK_LINES)
        first = next(chunks)  # an empty file raised already
        tokenizer, context, vocab = _start(session, settings, record, first[0], data)
        with ThreadPoolExecutor(max_workers=1) as pool:
            # The tokenizer runs in Rust outside the GIL, in the pool's thread; everything else is Python on
            # this one. A chunk's prompts are rendered (chat templates are Python) and sent to be tokenized
            # before the chunk before it is stored, so the tokenizer works while this thread parses the next
            # chunk, hashes and inserts.
            waiting: tuple[list[openai_batch.BatchLine], Future[list[int]], list[bytes]] | None = None
            for chunk in itertools.chain([first], chunks):
                _check_shared(chunk, record)
                _check_token_ids(chunk, vocab)
                counting = pool.submit(
                    count_tokens, tokenizer, render_prompts(tokenizer, chunk), chunk[0].url
                )
                if waiting:
                    _store(session, record, context, *waiting)
                hashes = [line_hash(line.raw) for line in chunk]
                leaves += [
                    input_leaf(len(leaves) + i, line.custom_id, h)
                    for i, (line, h) in enumerate(zip(chunk, hashes, strict=True))
                ]
                waiting = (chunk, counting, hashes)
            assert waiting is not None
            _store(session, record, context, *waiting)
    except openai_batch.BatchFormatError as exc:
        raise InvalidInput(str(exc), "file", "invalid_file") from exc
    record.input_root = "0x" + MerkleTree(leaves).root.hex()
    return record


def _chunks(lines: Iterator[openai_batch.BatchLine], size: int) -> Iterator[list[openai_batch.BatchLine]]:
    """Consecutive lists of `size` lines (the last may be shorter)."""
    while chunk := list(itertools.islice(lines, size)):
        yield chunk


def _start(
    session: Session,
    settings: Settings,
    record: File,
    first: openai_batch.BatchLine,
    data: openai_batch.FileBytes,
) -> tuple[Any, int, int]:
    """At the first line: the served model's tokenizer, context and vocabulary size, and the file's record and
    content added (its requests' rows refer to it)."""
    served = settings.model(first.model)
    if served is None:
        raise InvalidInput(
            f"line {first.line_number}: model {first.model!r} is not served here "
            f"(served: {settings.offered})",
            "file",
            "model_not_found",
        )
    record.endpoint, record.model = first.url, first.model
    session.add(record)
    session.flush()
    # bound as a buffer (a mapped upload is not copied into Python memory; the driver reads it as it stores)
    session.execute(insert(FileContent).values(file_id=record.id, data=data))
    return _tokenizer(served.path)


def _check_shared(chunk: Sequence[openai_batch.BatchLine], record: File) -> None:
    """Every request of a batch uses the file's one endpoint and one model (its first line's)."""
    for line in chunk:
        if line.url != record.endpoint:
            raise InvalidInput(
                f"line {line.line_number}: every request in a batch must use one endpoint "
                f"({record.endpoint})",
                "file",
                "invalid_file",
            )
        if line.model != record.model:
            raise InvalidInput(
                f"line {line.line_number}: every request in a batch must use one model ({record.model})",
                "file",
                "invalid_file",
            )


def _check_token_ids(chunk: Sequence[openai_batch.BatchLine], vocab: int) -> None:
    """A prompt given as token ids names only tokens of the model's vocabulary (the model could not embed
    another: found here, not when a miner fails the line)."""
    for line in chunk:
        if isinstance(line.prompt, tuple) and (outside := max(line.prompt)) >= vocab:
            raise InvalidInput(
                f"line {line.line_number}: body.prompt holds token id {outside}, outside the model's "
                f"vocabulary of {vocab}",
                "file",
                "invalid_file",
            )


def _store(
    session: Session,
    record: File,
    context: int,
    chunk: list[openai_batch.BatchLine],
    counting: Future[list[int]],
    hashes: list[bytes],
) -> None:
    """A chunk's request rows, once its prompts are counted and fit the model's context."""
    prompt_tokens = counting.result()
    check_context(chunk, prompt_tokens, context)
    first = record.line_count
    # on the session's connection: Session.execute would take the ORM's bulk insert, nearly twice as slow
    session.connection().execute(
        insert(Request),
        [
            {
                "file_id": record.id,
                "line_index": first + i,
                "custom_id": line.custom_id,
                "line_hash": "0x" + h.hex(),
                "prompt_tokens": tokens,
                "max_tokens": line.max_tokens,
            }
            for i, (line, h, tokens) in enumerate(zip(chunk, hashes, prompt_tokens, strict=True))
        ],
    )
    record.line_count += len(chunk)
    record.input_tokens = (record.input_tokens or 0) + sum(prompt_tokens)
    record.max_output_tokens = (record.max_output_tokens or 0) + sum(line.max_tokens for line in chunk)


def count_prompt_tokens(tokenizer: Any, lines: list[openai_batch.BatchLine]) -> list[int]:
    """`len(openai_batch.prompt_token_ids(tokenizer, line))` for each line of a file (one endpoint), in
    batched calls rather than one chat-template render and one tokenizer call per line."""
    return count_tokens(tokenizer, render_prompts(tokenizer, lines), lines[0].url)


def render_prompts(tokenizer: Any, lines: list[openai_batch.BatchLine]) -> Sequence[Prompt]:
    """Each line's prompt before tokenizing: the chat rendered by the template with the assistant turn opened,
    or the completion prompt as given (text, or token ids)."""
    if lines[0].url == openai_batch.CHAT:
        conversations = [[{"role": r, "content": c} for r, c in line.messages] for line in lines]
        rendered: list[str] = tokenizer.apply_chat_template(
            conversations, tokenize=False, add_generation_prompt=True
        )
        return rendered
    return [line.prompt for line in lines]


def count_tokens(tokenizer: Any, prompts: Sequence[Prompt], url: str) -> list[int]:
    """The token count of each rendered prompt of a file on `url`. A rendered chat holds its special tokens
    already; a completion text gets the tokenizer's, as `prompt_token_ids` encodes it."""
    counts = [len(prompt) for prompt in prompts]  # right for token ids given as such; texts follow
    texts = {i: prompt for i, prompt in enumerate(prompts) if isinstance(prompt, str)}
    if texts:
        add_special_tokens = url != openai_batch.CHAT
        text_counts = _token_counts(tokenizer, list(texts.values()), add_special_tokens=add_special_tokens)
        for i, count in zip(texts, text_counts, strict=True):
            counts[i] = count
    return counts


def _token_counts(tokenizer: Any, texts: list[str], *, add_special_tokens: bool) -> list[int]:
    """`len(tokenizer(text, add_special_tokens=...)["input_ids"])` for each text. A fast tokenizer's Rust
    backend is asked directly: its encodings know their length, while transformers would first copy every id
    into Python lists, which takes longer than tokenizing."""
    if getattr(tokenizer, "backend_tokenizer", None) is None:  # no Rust backend (sentencepiece, pure Python)
        return [len(ids) for ids in tokenizer(texts, add_special_tokens=add_special_tokens)["input_ids"]]
    encodings = _untruncated_backend(tokenizer).encode_batch(texts, add_special_tokens=add_special_tokens)
    return [len(encoding) for encoding in encodings]


def _untruncated_backend(tokenizer: Any) -> Any:
    """The Rust tokenizer set up as transformers sets it for a call without truncation or padding. Like
    transformers, it changes only what differs: a change waits until no other thread is encoding."""
    backend = tokenizer.backend_tokenizer
    if backend.truncation is not None:
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    if backend.encode_special_tokens != tokenizer.split_special_tokens:
        backend.encode_special_tokens = tokenizer.split_special_tokens
    return backend


def check_context(lines: list[openai_batch.BatchLine], prompt_tokens: list[int], context: int) -> None:
    """A prompt that cannot fit with its max_tokens in the model's context is an error naming the line."""
    for line, tokens in zip(lines, prompt_tokens, strict=True):
        if tokens + line.max_tokens > context:
            raise InvalidInput(
                f"line {line.line_number}: the prompt has {tokens} tokens and max_tokens is "
                f"{line.max_tokens}, over the model's context of {context}",
                "file",
                "context_length_exceeded",
            )


@lru_cache(maxsize=8)
def _tokenizer(path: Path) -> tuple[Any, int, int]:
    """The checkpoint's tokenizer, context length and vocabulary size (the embedding's rows)."""
    from transformers import AutoTokenizer  # slow to import; only the ingest path needs it

    config = json.loads((path / "config.json").read_text())
    return (
        AutoTokenizer.from_pretrained(path),
        int(config["max_position_embeddings"]),
        int(config["vocab_size"]),
    )


def get_file(session: Session, owner: str, file_id: str) -> File:
    record = session.get(File, file_id)
    if record is None or record.owner != owner:
        raise NotFound("file", file_id)
    return record


# a batch's results are read once its commit was sent: the miners are paid for what the owner reads (an owner
# reading them while the batch waits for signatures could let the task expire, refunded in full)
RESULTS_READABLE = frozenset({"completed", "cancelled"})


def file_content(session: Session, record: File) -> bytes:
    """The file's bytes; InvalidInput for a batch's output or error file before its results were committed (a
    400, not a 409: openai-python retries a 409)."""
    if record.purpose != "batch":
        producer = session.scalars(
            select(Batch)
            .where((Batch.output_file_id == record.id) | (Batch.error_file_id == record.id))
            .limit(1)
        ).first()
        if producer is not None and producer.status not in RESULTS_READABLE:
            raise InvalidInput(
                f"file {record.id} holds the results of batch {producer.id}, which is {producer.status}: "
                "they can be read once the miners' signed commitment is on-chain (the batch completed)",
                "file_id",
                "results_not_committed",
            )
    content = session.get(FileContent, record.id)
    if content is None:
        raise NotFound("file", record.id)
    return content.data


def list_files(
    session: Session, owner: str, limit: int, after: str | None, purpose: str | None
) -> tuple[list[File], bool]:
    """The owner's files (of `purpose` if given), newest first, `limit` per page after the file `after`; and
    whether more exist."""
    cursor = get_file(session, owner, after) if after is not None else None
    query = select(File).where(File.owner == owner)
    if purpose is not None:
        query = query.where(File.purpose == purpose)
    return newest_first(session, query, File, cursor, limit)


def delete_file(session: Session, owner: str, file_id: str) -> None:
    """Deletes the owner's file and its contents. A batch's input stays as long as the batch (its lines are
    what the task's input root commits to and what a dispute proves), and an output or error file stays until
    its batch has settled on-chain, while the owner may still need it to dispute a line."""
    record = get_file(session, owner, file_id)
    uses = select(Batch).where(
        (Batch.input_file_id == file_id)
        | (((Batch.output_file_id == file_id) | (Batch.error_file_id == file_id)) & ~Batch.finalized)
    )
    batch = session.scalars(uses.limit(1)).first()
    if batch is not None:
        role = "input" if batch.input_file_id == file_id else "results, not settled yet,"
        raise InvalidInput(f"file {file_id} is the {role} of batch {batch.id}", "file_id", "file_in_use")
    session.delete(record)


def file_object(record: File, settings: Settings) -> dict[str, Any]:
    """The file in OpenAI's shape, plus, for batch inputs, what the on-chain task must commit to."""
    obj: dict[str, Any] = {
        "id": record.id,
        "object": "file",
        "bytes": record.bytes,
        "created_at": record.created_at,
        "filename": record.filename,
        "purpose": record.purpose,
    }
    if record.purpose == "batch":
        obj |= {
            "request_count": record.line_count,
            "endpoint": record.endpoint,
            "model": record.model,
            # what a task for this file must name on-chain: the identity of the checkpoint served as `model`
            "model_hash": _model_hash(settings, record.model),
            "input_root": record.input_root,
            "input_tokens": record.input_tokens,
            "max_output_tokens": record.max_output_tokens,
        }
    return obj


def _model_hash(settings: Settings, name: str | None) -> str | None:
    served = settings.model(name) if name is not None else None
    return "0x" + served.model_hash.hex() if served is not None else None
