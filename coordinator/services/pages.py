"""Lists in OpenAI's shape: an owner's objects newest first, a page at a time after a cursor object."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import Session

from coordinator.services.errors import InvalidInput

MAX_LIST_LIMIT = 100
Row = TypeVar("Row")


def newest_first(
    session: Session, query: Select[Row], table: Any, cursor: Any | None, limit: int
) -> tuple[list[Row], bool]:
    """Up to `limit` rows of `query` (over `table`, which has `created_at` and `id`), newest first, after the
    row `cursor` when given; and whether more follow."""
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInput(f"limit must be from 1 to {MAX_LIST_LIMIT}", "limit")
    if cursor is not None:
        query = query.where(
            (table.created_at < cursor.created_at)
            | ((table.created_at == cursor.created_at) & (table.id < cursor.id))
        )
    rows = session.scalars(query.order_by(table.created_at.desc(), table.id.desc()).limit(limit + 1)).all()
    return list(rows[:limit]), len(rows) > limit


def page_object(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """The list envelope openai-python pages through."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
