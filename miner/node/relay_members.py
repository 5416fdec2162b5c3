"""A relay's question to the coordinator: which link keys it serves (GET /v1/relays/members), read with a
size and nesting limit and every key checked, so a hostile or broken answer is refused, never trusted."""

from __future__ import annotations

import httpx

from client_sdk import bounded_json
from client_sdk.protocol.envelope import read_error
from client_sdk.protocol.link_keys import is_link_key
from miner.transport.relay_admission import MembersUnavailable, RelayMembers

MAX_ANSWER_BYTES = 16 * 2**20  # about 180,000 miners' keys, twice over


class CoordinatorMembers:
    """Fetches the members of the relay whose public key is `relay_key` from the coordinator at `url`."""

    def __init__(self, url: str, relay_key: bytes, timeout_s: float = 10.0) -> None:
        self.url = url
        self._params = {"key": relay_key.decode()}
        self._http = httpx.Client(base_url=url, timeout=timeout_s)

    def __call__(self) -> RelayMembers:
        try:
            with self._http.stream("GET", "/v1/relays/members", params=self._params) as response:
                body = _read_at_most(response, MAX_ANSWER_BYTES)
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
        return RelayMembers(relayed=self._keys(data, "relayed"), senders=self._keys(data, "senders"))

    def _keys(self, data: dict[str, object], field: str) -> frozenset[bytes]:
        value = data.get(field)
        if not isinstance(value, list) or not all(isinstance(key, str) for key in value):
            raise MembersUnavailable(f"the coordinator's {field!r} is not a list of link keys")
        keys = frozenset(key.encode() for key in value)
        if not all(is_link_key(key) for key in keys):
            raise MembersUnavailable(f"the coordinator's {field!r} names something that is not a link key")
        return keys

    def close(self) -> None:
        self._http.close()


def _read_at_most(response: httpx.Response, limit: int) -> bytes:
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > limit:
            raise MembersUnavailable(f"the coordinator at {response.url} answered more than {limit} bytes")
    return bytes(body)
