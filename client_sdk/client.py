"""The user's library, shaped like the openai-python client so switching is one line:

    client = Client("http://coordinator:8000", rpc_url="http://127.0.0.1:8545", key=account,
                    deployment="deployment.json")
    file = client.files.create(file=open("batch.jsonl", "rb"), purpose="batch")
    batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions",
                                  completion_window="24h", max_price=5_000_000)

`batches.create` also creates and funds the on-chain task for the file (one call, one payment).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
from eth_account.signers.local import LocalAccount
from pydantic import BaseModel, ConfigDict

from client_sdk.chain.contracts import Market, connect
from client_sdk.encoding import hex_bytes
from client_sdk.errors import ContractRevert, UserError
from client_sdk.http import coordinator_client, json_of
from client_sdk.inputs import input_tree, params_hash
from client_sdk.openai_batch import parse_batch
from client_sdk.protocol.constants import FINAL_BATCH_STATUSES
from client_sdk.protocol.envelope import read_error
from client_sdk.protocol.model_identity import describe, known_hash, parse_model_hash
from client_sdk.protocol.task import TaskPrices, TaskStatus
from client_sdk.units import format_amount
from client_sdk.verify import ResultsRejected, VerifiedLine, check_commitment, check_inputs, check_lines

DEFAULT_TIMEOUT_S = 60.0


class ApiObject(BaseModel):
    """A response object: attribute access like openai-python's models; unknown fields are kept."""

    model_config = ConfigDict(extra="allow")


class RequestCounts(ApiObject):
    total: int
    completed: int
    failed: int


class FileObject(ApiObject):
    id: str
    object: str
    bytes: int
    created_at: int
    filename: str
    purpose: str
    request_count: int | None = None
    endpoint: str | None = None
    model: str | None = None
    model_hash: str | None = None  # the identity of the checkpoint the coordinator serves as `model`
    input_root: str | None = None
    input_tokens: int | None = None  # prompt tokens of all lines
    max_output_tokens: int | None = None  # the lines' max_tokens added up


class Usage(ApiObject):
    """Tokens of the lines served so far (the committed usage once the batch is committed)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int


class BatchError(ApiObject):
    """Why a batch failed (the whole batch, before any line ran): a code, a message, the parameter or line."""

    code: str | None = None
    message: str
    param: str | None = None
    line: int | None = None


class BatchErrors(ApiObject):
    data: list[BatchError]


class Batch(ApiObject):
    id: str
    object: str
    endpoint: str
    input_file_id: str
    completion_window: str
    status: str
    created_at: int
    expires_at: int
    request_counts: RequestCounts
    task_id: int
    output_file_id: str | None = None
    error_file_id: str | None = None
    metadata: dict[str, str] | None = None
    results_root: str | None = None
    status_detail: str | None = None  # why the batch is waiting, when it is
    usage: Usage | None = None
    errors: BatchErrors | None = None


class BatchPage(ApiObject):
    data: list[Batch]
    has_more: bool
    first_id: str | None = None
    last_id: str | None = None


class FilePage(ApiObject):
    data: list[FileObject]
    has_more: bool
    first_id: str | None = None
    last_id: str | None = None


@dataclass(frozen=True)
class BatchResults:
    output: list[VerifiedLine]
    errors: list[VerifiedLine]


class ApiError(UserError):
    """The coordinator refused a call; `str()` is its one-line reason."""

    def __init__(self, status: int, message: str, code: str | None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class Client:
    def __init__(
        self,
        coordinator_url: str,
        *,
        key: LocalAccount,
        rpc_url: str | None = None,
        deployment: str | Path | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.account = key
        self.http = coordinator_client(coordinator_url, key, timeout_s, transport)
        self._rpc_url = rpc_url
        self._deployment = Path(deployment) if deployment is not None else None
        self._market: Market | None = None
        self.files = Files(self)
        self.batches = Batches(self)

    @property
    def market(self) -> Market:
        """The on-chain side, connected on first use."""
        if self._market is None:
            if self._rpc_url is None or self._deployment is None:
                raise UserError("this call needs the chain: pass rpc_url and deployment to Client")
            self._market = connect(self._rpc_url, self._deployment, self.account)
        return self._market

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise UserError(f"cannot reach the coordinator at {self.http.base_url}: {exc}") from exc
        if response.is_success:
            return response
        try:
            error = read_error(json_of(response))
        except ValueError:  # not JSON, or too deep
            error = None
        message, code = error or (f"HTTP {response.status_code}: {response.text[:200]}", None)
        raise ApiError(response.status_code, message, code)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class Files:
    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, *, file: str | Path | bytes | IO[bytes], purpose: str = "batch") -> FileObject:
        """Uploads a batch JSONL; the coordinator validates every line before accepting it."""
        if isinstance(file, str | Path):
            name, data = Path(file).name, Path(file).read_bytes()
        elif isinstance(file, bytes):
            name, data = "batch.jsonl", file
        else:
            name, data = Path(getattr(file, "name", "batch.jsonl")).name, file.read()
        response = self._client.request(
            "POST", "/v1/files", files={"file": (name, data, "application/jsonl")}, data={"purpose": purpose}
        )
        created = FileObject.model_validate(json_of(response))
        if created.input_root is not None:  # the task will commit to this root: it must be our file's
            lines = parse_batch(data, max_lines=max(1, data.count(b"\n") + 1))
            if created.input_root != "0x" + input_tree([line.raw for line in lines]).root.hex():
                raise ResultsRejected(f"the coordinator's input root for {name} is not the file's own")
        return created

    def retrieve(self, file_id: str) -> FileObject:
        return FileObject.model_validate(json_of(self._client.request("GET", f"/v1/files/{file_id}")))

    def content(self, file_id: str) -> bytes:
        return self._client.request("GET", f"/v1/files/{file_id}/content").content

    def list(self, *, limit: int = 20, after: str | None = None, purpose: str | None = None) -> FilePage:
        """Your files, newest first, `limit` per page after the file `after`."""
        params: dict[str, str | int] = {"limit": limit}
        if after is not None:
            params["after"] = after
        if purpose is not None:
            params["purpose"] = purpose
        return FilePage.model_validate(json_of(self._client.request("GET", "/v1/files", params=params)))

    def delete(self, file_id: str) -> None:
        """Deletes one of your files (refused while a batch still needs it)."""
        self._client.request("DELETE", f"/v1/files/{file_id}")


def check_value_cap(market: Market, max_price: int) -> None:
    """Refuses, before any transaction, a max price that leaves no room under the value cap for even one
    miner's stake lock: no coordinator could assign such a task."""
    cap, lock = market.tasks.max_value_at_risk(), market.tasks.min_stake_lock()
    if max_price + lock > cap:
        most = format_amount(max(0, cap - lock))
        raise UserError(
            f"the max price {format_amount(max_price)} is more than one task may put at stake: the cap is "
            f"{format_amount(cap)} for the max price plus every miner's stake lock "
            f"({format_amount(lock)} each), so at most {most}; split the batch"
        )


def check_covers_the_file(file: FileObject, prices: TaskPrices, max_price: int) -> None:
    """Refuses, before any transaction, a max price below the most the file can cost at `prices` (every
    prompt token and every line's max_tokens): the coordinator would refuse the batch, and miners are paid at
    most the max price."""
    if file.input_tokens is None or file.max_output_tokens is None:
        return  # a coordinator that does not say: it checks the batch against the task itself
    worst = prices.price(file.input_tokens, file.max_output_tokens)
    if max_price < worst:
        raise UserError(
            f"the max price {format_amount(max_price)} is less than this file can cost: up to "
            f"{format_amount(worst)} for {file.input_tokens} input tokens and up to {file.max_output_tokens} "
            f"output tokens (the lines' max_tokens) at {format_amount(prices.input_per_million)} and "
            f"{format_amount(prices.output_per_million)} per million; raise the max price to at least "
            f"{format_amount(worst)} or lower the lines' max_tokens"
        )


class Batches:
    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        *,
        input_file_id: str,
        endpoint: str,
        max_price: int,
        completion_window: str = "24h",
        metadata: dict[str, str] | None = None,
        prices: TaskPrices | None = None,
        model_hash: str | None = None,
    ) -> Batch:
        """Creates and funds the on-chain task for the file (`fund_task`), then registers the batch. If the
        coordinator refuses it, the task is cancelled again so the escrow comes back."""
        task_id = self.fund_task(
            input_file_id=input_file_id,
            endpoint=endpoint,
            max_price=max_price,
            completion_window=completion_window,
            prices=prices,
            model_hash=model_hash,
        )
        body = {
            "input_file_id": input_file_id,
            "endpoint": endpoint,
            "completion_window": completion_window,
            "metadata": metadata,
            "task_id": task_id,
        }
        try:
            response = self._client.request("POST", "/v1/batches", json=body)
        except UserError as exc:
            self._client.market.tasks.cancel_task(task_id)
            raise UserError(
                f"the coordinator refused the batch ({exc}); task {task_id} was cancelled and "
                "its escrow refunded"
            ) from exc
        return Batch.model_validate(json_of(response))

    def fund_task(
        self,
        *,
        input_file_id: str,
        endpoint: str,
        max_price: int,
        completion_window: str = "24h",
        prices: TaskPrices | None = None,
        model_hash: str | None = None,
    ) -> int:
        """Creates the on-chain task for an uploaded batch file at `prices` per million tokens (by default
        what the coordinator asks), escrowing `max_price` (token base units); returns its id. The task pays
        the tokens served at those prices, at most `max_price`. Register the batch with it next: `create` does
        both, and openai-python's `batches.create` takes it as `metadata={"task_id": str(task_id)}`.

        The task names the model by the hash of the weights the coordinator serves under the file's model
        name; `model_hash` (0x-hex) pins the weights you expect, and a model this SDK knows by name is pinned
        to its known hash: a coordinator serving other weights under that name is refused before any money
        moves."""
        file = self._client.files.retrieve(input_file_id)
        if file.input_root is None or file.model is None or file.request_count is None:
            raise UserError(f"file {input_file_id} is not a batch input file")
        model = task_model_id(file.model, file.model_hash, model_hash)
        if endpoint != file.endpoint:
            raise UserError(f"the file's requests are for {file.endpoint}, not {endpoint}")
        hours = _window_hours(completion_window)
        market = self._client.market
        owner = self._client.account.address
        held = market.token.balance_of(owner)
        if held < max_price:
            raise UserError(
                f"the wallet {owner} holds {format_amount(held)}, less than the max price "
                f"{format_amount(max_price)}"
            )
        check_value_cap(market, max_price)
        prices = prices or self.asking_prices()
        check_covers_the_file(file, prices, max_price)
        with market.token.allowing(owner, market.escrow.address, max_price):
            return market.tasks.create_task(
                model,
                hex_bytes(file.input_root),
                file.request_count,
                params_hash(endpoint, completion_window),
                max_price,
                market.chain_time() + hours * 3600,
                prices,
            )

    def asking_prices(self) -> TaskPrices:
        """The least the coordinator accepts per million input and output tokens."""
        response = self._client.request("GET", "/v1/prices")
        try:
            body = json_of(response)
            return TaskPrices(int(body["input_per_million"]), int(body["output_per_million"]))
        except (KeyError, TypeError, ValueError):
            raise UserError("the coordinator's /v1/prices answer is malformed") from None

    def retrieve(self, batch_id: str) -> Batch:
        return Batch.model_validate(json_of(self._client.request("GET", f"/v1/batches/{batch_id}")))

    def list(self, *, limit: int = 20, after: str | None = None) -> BatchPage:
        params: dict[str, str | int] = {"limit": limit}
        if after is not None:
            params["after"] = after
        return BatchPage.model_validate(json_of(self._client.request("GET", "/v1/batches", params=params)))

    def cancel(self, batch_id: str) -> Batch:
        """Stops the batch: finished requests are kept and paid for. If no miner was assigned yet, the task is
        also cancelled on-chain, so the whole escrow is back in the owner's balance at once; if miners were
        assigned but served nothing, the coordinator releases the task on-chain, which refunds it too;
        otherwise the coordinator settles what was done."""
        batch = Batch.model_validate(json_of(self._client.request("POST", f"/v1/batches/{batch_id}/cancel")))
        tasks = self._client.market.tasks
        if tasks.get_task(batch.task_id).status == TaskStatus.OPEN:
            try:
                tasks.cancel_task(batch.task_id)
            except ContractRevert:  # the coordinator released or assigned it meanwhile: its path refunds
                if tasks.get_task(batch.task_id).status == TaskStatus.OPEN:
                    raise
        return batch

    def results(self, batch_id: str) -> BatchResults:
        """The batch's output and error lines, each checked against the chain (see client_sdk.verify);
        raises ResultsRejected naming the first line or signature that fails."""
        batch = self.retrieve(batch_id)
        if batch.results_root is None:
            raise UserError(f"batch {batch_id} is {batch.status}: it has no committed results yet")
        client = self._client
        committed = json_of(client.request("GET", f"/v1/batches/{batch_id}/commitment"))
        market = client.market
        committed_results = check_commitment(
            market, batch.task_id, committed["commitment"], committed["signatures"]
        )
        if "0x" + committed_results.root.hex() != batch.results_root:
            raise ResultsRejected(
                f"batch {batch_id}: the reported results root differs from the committed one"
            )
        inputs = check_inputs(
            batch.task_id, committed_results.input_root, client.files.content(batch.input_file_id)
        )
        output = batch.output_file_id and client.files.content(batch.output_file_id)
        errors = batch.error_file_id and client.files.content(batch.error_file_id)
        return BatchResults(
            output=check_lines(batch.task_id, committed_results, output or b"", inputs),
            errors=check_lines(batch.task_id, committed_results, errors or b"", inputs),
        )

    def wait(self, batch_id: str, *, poll_s: float = 2.0, timeout_s: float | None = None) -> Batch:
        """Polls until the batch reaches a final status."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            batch = self.retrieve(batch_id)
            if batch.status in FINAL_BATCH_STATUSES:
                return batch
            if deadline is not None and time.monotonic() > deadline:
                raise UserError(f"batch {batch_id} is still {batch.status} after {timeout_s} s")
            time.sleep(poll_s)


def task_model_id(name: str, served: str | None, pinned: str | None) -> bytes:
    """The model id a task for `name` carries: the coordinator's hash of what it serves as `name`, checked
    against the hash the caller pinned and against the hash this SDK knows for `name`."""
    if served is None:
        raise UserError(f"the coordinator gave no model hash for {name!r}")
    model = parse_model_hash(served)
    expected = parse_model_hash(pinned) if pinned is not None else known_hash(name)
    if model is None or (pinned is not None and expected is None):
        raise UserError("a model hash must be 32 bytes in hex")
    if expected is not None and model != expected:
        raise UserError(
            f"the coordinator serves other weights as {name!r} ({describe(model)}) than expected "
            f"({describe(expected)}); no task was created"
        )
    return model


def _window_hours(window: str) -> int:
    if not window.endswith("h") or not window[:-1].isdigit() or int(window[:-1]) < 1:
        raise UserError(f"completion_window must be whole hours like '24h', not {window!r}")
    return int(window[:-1])
