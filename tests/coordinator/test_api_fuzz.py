"""The whole HTTP API fuzzed from its own OpenAPI schema (Schemathesis): every operation, with generated
parameters and bodies, signed by a wallet and unsigned. No request gets a server error, and every answer
matches the schema the API publishes."""

from __future__ import annotations

import os

import requests
import schemathesis
from hypothesis import HealthCheck, given, settings

from client_sdk.auth import sign_request
from tests.coordinator.conftest import ALICE, ApiServer

# Examples per operation in `make test`; set BATCHMARKET_FUZZ_EXAMPLES for a longer run.
EXAMPLES = int(os.environ.get("BATCHMARKET_FUZZ_EXAMPLES", "8"))
CHECKS = [schemathesis.checks.not_a_server_error, schemathesis.checks.response_schema_conformance]


class WalletAuth(requests.auth.AuthBase):
    """Signs each prepared request as ALICE, over exactly the bytes that will be sent."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        body = request.body or b""
        raw = body.encode() if isinstance(body, str) else body
        request.headers["Authorization"] = sign_request(ALICE, str(request.method), request.path_url, raw)
        return request


def test_no_request_gets_a_server_error(api: ApiServer) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    signed = requests.Session()
    signed.auth = WalletAuth()
    sessions = (signed, requests.Session())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15, "the schema lost operations"
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def exchange(case: schemathesis.Case) -> None:
            for session in sessions:
                response = case.call(base_url=api.url, session=session)
                case.validate_response(response, checks=CHECKS)

        exchange()
