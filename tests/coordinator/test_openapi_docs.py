"""/docs works on a machine without internet access (Swagger UI's scripts and styles come from a package, not
a CDN), and the OpenAPI schema says what the API does: the wallet auth scheme on every signed operation, the
error envelope on 400/401/404/413/503 (409 only on the miners' and disputes' protocol routes), response models
for files and batches, and no 422, which the API never answers (a malformed request is a 400)."""

from __future__ import annotations

import json
from typing import Any

from tests.coordinator.conftest import ALICE, ApiServer

ERROR_ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}


def test_the_docs_page_and_its_assets_are_served_by_the_api(api: ApiServer) -> None:
    client = api.client(ALICE)
    page = client.get("/docs", auth=None)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/docs/assets/swagger-ui-bundle.js" in page.text and "/docs/assets/swagger-ui.css" in page.text
    assert "cdn" not in page.text.lower()
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        answer = client.get(f"/docs/assets/{asset}", auth=None)
        assert answer.status_code == 200 and len(answer.content) > 10_000


def test_the_schema_declares_auth_errors_and_response_models(api: ApiServer) -> None:
    schema: dict[str, Any] = api.client(ALICE).get("/openapi.json", auth=None).json()
    assert schema["components"]["securitySchemes"]["Wallet"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": schema["components"]["securitySchemes"]["Wallet"]["description"],
    }
    assert '"422"' not in json.dumps(schema)
    paths = schema["paths"]
    retrieve = paths["/v1/batches/{batch_id}"]["get"]
    assert retrieve["security"] == [{"Wallet": []}]
    assert retrieve["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/BatchObject"
    }
    for status in ("400", "401", "404", "413", "503"):
        assert retrieve["responses"][status]["content"]["application/json"]["schema"] == ERROR_ENVELOPE
    assert "409" not in retrieve["responses"]
    assert "409" in paths["/v1/miners/work/claim"]["post"]["responses"]
    listed = paths["/v1/files"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert listed == {"$ref": "#/components/schemas/FileList"}
    batch = schema["components"]["schemas"]["BatchObject"]["properties"]
    assert {"usage", "task_id", "status_detail", "request_counts"} <= set(batch)
