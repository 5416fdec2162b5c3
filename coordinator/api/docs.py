"""/docs: the interactive API documentation (Swagger UI) with its scripts and styles served from the
swagger-ui-bundle package, so that it works on a machine without internet access (FastAPI's default loads
them from a CDN); and the OpenAPI schema as the API answers: a malformed request is a 400 with the error
envelope (coordinator.api.errors), never FastAPI's 422."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

ASSETS = "/docs/assets"


def install(app: FastAPI) -> None:
    """Serves /docs and its assets, and the schema at /openapi.json; the app must be created with
    docs_url=None and redoc_url=None."""
    app.mount(ASSETS, StaticFiles(directory=swagger_ui_path), name="swagger-ui")

    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            generated = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            for operations in generated.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            for unused in ("HTTPValidationError", "ValidationError"):
                generated.get("components", {}).get("schemas", {}).pop(unused, None)
            app.openapi_schema = generated
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title}: API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
        )
