"""A relay's question to the coordinator: which link keys it serves (GET /v1/relays/members), read within a
size limit and a deadline, parsed with the nesting limit and every key checked, so a hostile, broken or slow
answer is refused, never trusted."""

from __future__ import annotations

import time

import httpx

from client_sdk import bounded_json
from client_sdk.protocol.envelope import read_error
from client_sdk.protocol.link_keys import is_link_key
from miner.transport.relay_admission import MembersUnavailable, RelayMembers

MAX_ANSWER_BYTES = 16 * 2**20  # about 180,000 miners' keys, twice over
ANSWER_DEADLINE_S = 10.0  # for the whole answer (httpx's timeout bounds each read, not the sum)


class CoordinatorMembers:
    """Fetches the members of the relay whose public key is `relay_key` from the coordinator at `url`."""

    def __init__(self, url: str, relay_key: bytes, timeout_s: float = 5.0) -> None:
        self.url = url
        self._params = {"key": relay_key.decode()}
        self._http = httpx.Client(base_url=url, timeout=timeout_s)
        self._checked: frozenset[bytes] = frozenset()  # keys of the last answer, known to be link keys

    def __call__(self) -> RelayMembers:
        try:
            with self._http.stream("GET", "/v1/relays/members", params=self._params) as response:
                body = self._read(response)
        except httpx.HTTPError as exc:
            raise MembersUnavailable(f"cannot reach the coordinator at {self.url}: {exc}") from None
        try:
            data = bounded_json.loads(body)
        except ValueError:
            data = None
        if response.status_code != 200:
            error = read_error(data) if data is not None else None
            raise MembersUnavailable(
                f"the coordinator at {self.url} answered HTTP {response.status_code}"
                + (f": {error[0]}" if error else "")
            )
        if not isinstance(data, dict):
            raise MembersUnavailable(f"the coordinator at {self.url} answered with no members object")
        relayed, senders = self._keys(data, "relayed"), self._keys(data, "senders")
        self._checked = relayed | senders
        return RelayMembers(relayed=relayed, senders=senders)

    def _read(self, response: httpx.Response) -> bytes:
        deadline = time.monotonic() + ANSWER_DEADLINE_S
        body = bytearray()
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_ANSWER_BYTES:
                raise MembersUnavailable(
                    f"the coordinator at {self.url} answered more than {MAX_ANSWER_BYTES} bytes"
                )
            if time.monotonic() > deadline:
                raise MembersUnavailable(
                    f"the coordinator at {self.url} took over {ANSWER_DEADLINE_S:.0f} s to answer"
                )
        return bytes(body)

    def _keys(self, data: dict[str, object], field: str) -> frozenset[bytes]:
        value = data.get(field)
        if not isinstance(value, list) or not all(isinstance(key, str) and key.isascii() for key in value):
            raise MembersUnavailable(f"the coordinator's {field!r} is not a list of link keys")
        keys = frozenset(key.encode() for key in value)
        if not all(is_link_key(key) for key in keys - self._checked):  # most were checked last time
            raise MembersUnavailable(f"the coordinator's {field!r} names something that is not a link key")
        return keys

    def close(self) -> None:
        self._http.close()
