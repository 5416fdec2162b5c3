"""How a benchmark reports: its tables and notes on the terminal and in results/NAME.txt, its plot in
results/NAME.png."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from rich.console import Console, RenderableType
from rich.table import Table

RESULTS = Path(__file__).parent / "results"


def publish(
    name: str,
    tables: Sequence[RenderableType],
    *,
    width: int,
    plot: Callable[[Path], None],
    notes: Sequence[str] = (),
    out: Path = RESULTS,
) -> None:
    """Prints the tables, then the notes as plain text (no markup), `width` columns wide; writes the same text
    to out/NAME.txt, has `plot` draw out/NAME.png, and prints where they went."""
    console = Console(width=width, record=True)
    for table in tables:
        console.print(table)
    for note in notes:
        console.print(note, markup=False, emoji=False)
    out.mkdir(parents=True, exist_ok=True)
    text, figure = out / f"{name}.txt", out / f"{name}.png"
    text.write_text(console.export_text())
    plot(figure)
    print(f"wrote {text} and {figure}")


def report_table(
    title: str, columns: Sequence[str], *, left: Collection[str] = (), caption: str | None = None
) -> Table:
    """A table with these columns in order, right-aligned (numbers) except those in `left` (labels)."""
    table = Table(title=title, caption=caption)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    return table
