"""The coordinator's miner API, as the node calls it; every request signed by the miner's wallet."""

from __future__ import annotations

from typing import Any

import httpx
from eth_account.signers.local import LocalAccount

from client_sdk.errors import UserError
from client_sdk.http import coordinator_client, json_of
from client_sdk.protocol.envelope import read_error


class CoordinatorError(UserError):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code  # the error envelope's code, e.g. "lease_lost"


class CoordinatorClient:
    def __init__(self, url: str, account: LocalAccount, timeout_s: float = 60.0) -> None:
        self.url, self.account, self.timeout_s = url, account, timeout_s
        self.http = coordinator_client(url, account, timeout_s)

    def clone(self) -> CoordinatorClient:
        """Another client with its own connections, for another thread."""
        return CoordinatorClient(self.url, self.account, self.timeout_s)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            response = self.http.request(method, path, json=body)
        except httpx.TransportError as exc:
            raise CoordinatorError(0, f"cannot reach the coordinator at {self.http.base_url}: {exc}") from exc
        if response.status_code == 204:
            return None
        if not response.is_success:
            try:
                error = read_error(json_of(response))
            except ValueError:  # not JSON, or too deep
                error = None
            raise CoordinatorError(
                response.status_code,
                error[0] if error else f"HTTP {response.status_code}",
                error[1] if error else None,
            )
        try:
            return json_of(response)
        except ValueError as exc:  # not JSON, too deep, or a number too long: a fault of the coordinator's
            raise CoordinatorError(
                response.status_code, f"unreadable answer to {method} {path}: {exc}"
            ) from exc

    def join(
        self,
        model: str,
        endpoint: str,
        link_key: str,
        region: str,
        device: dict[str, Any],
        relay: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Joins; the answer says whether the coordinator reached `endpoint` (`reachable`) and whether its
        peers will send through `relay` (`relayed`)."""
        body = {
            "model": model,
            "endpoint": endpoint,
            "link_key": link_key,
            "region": region,
            "device": device,
            "relay": relay,
        }
        result: dict[str, Any] = self._call("POST", "/v1/miners/join", body)
        return result

    def heartbeat(
        self,
        layer_latency_ms: float,
        queue_depth: int,
        units: list[int],
        rtt_ms: dict[str, float],
        relay_rtt_ms: float | None = None,
    ) -> list[int]:
        """Beats; returns the units of `units` that are no longer ours to serve."""
        body = {
            "layer_latency_ms": layer_latency_ms,
            "queue_depth": queue_depth,
            "units": units,
            "rtt_ms": rtt_ms,
            "relay_rtt_ms": relay_rtt_ms,
        }
        answer = self._call("POST", "/v1/miners/heartbeat", body)
        lost = answer.get("lost", []) if isinstance(answer, dict) else []
        return [int(u) for u in lost if isinstance(u, int)]

    def wake(self, seen: int | None, wait_s: float) -> int:
        """Waits up to `wait_s` for this miner's wake counter to differ from `seen`; returns the counter (one
        the wake route takes back as `seen`, else CoordinatorError)."""
        query = f"?wait_s={wait_s:g}" + (f"&seen={seen}" if seen is not None else "")
        answer = self._call("GET", "/v1/miners/wake" + query)
        counter = answer.get("counter") if isinstance(answer, dict) else None
        if not isinstance(counter, int) or isinstance(counter, bool) or not 0 <= counter < 2**63:
            raise CoordinatorError(200, f"unreadable answer to a wait: {answer!r:.200}")
        return counter

    def assignment(self) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self._call("GET", "/v1/miners/assignment")
        return result

    def claim(self) -> dict[str, Any] | None:
        result: dict[str, Any] | None = self._call("POST", "/v1/miners/work/claim")
        return result

    def progress(self, unit_id: int, lines: list[dict[str, Any]]) -> int:
        body = {"lines": lines}
        return _stored(self._call("POST", f"/v1/miners/work/{unit_id}/progress", body))

    def submit(self, unit_id: int, results: list[dict[str, Any]]) -> int:
        return _stored(self._call("POST", f"/v1/miners/work/{unit_id}/results", {"results": results}))

    def give_back(self, unit_ids: list[int]) -> None:
        """Gives up leased units at once: the coordinator hands them on without waiting for their leases."""
        self._call("POST", "/v1/miners/work/give-back", {"units": unit_ids})

    def proposals(self) -> list[dict[str, Any]]:
        """Assignments proposed to this miner, waiting for its consent."""
        result: list[dict[str, Any]] = self._call("GET", "/v1/miners/acceptances")
        return result

    def accept(self, batch_id: str, signature: bytes) -> None:
        self._call("POST", f"/v1/miners/acceptances/{batch_id}", {"signature": "0x" + signature.hex()})

    def pending_signatures(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/v1/miners/signing")
        return result

    def sign(self, batch_id: str, signature: bytes) -> None:
        self._call("POST", f"/v1/miners/signing/{batch_id}", {"signature": "0x" + signature.hex()})

    def unrecorded(self, batch_id: str, lines: list[int]) -> None:
        """Names the lines of the batch we were credited with but hold no record of: they are served again."""
        self._call("POST", f"/v1/miners/signing/{batch_id}/unrecorded", {"lines": lines})

    def close(self) -> None:
        self.http.close()


def _stored(answer: Any) -> int:
    """How many lines a progress or results answer says were stored; CoordinatorError for another shape."""
    stored = answer.get("stored") if isinstance(answer, dict) else None
    if not isinstance(stored, int) or isinstance(stored, bool):
        raise CoordinatorError(200, f"unreadable answer: {answer!r:.200}")
    return stored
