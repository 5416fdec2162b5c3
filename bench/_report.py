"""How a benchmark reports: its tables and notes on the terminal and in results/NAME.txt, its plot in
results/NAME.png."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
    text, image = out / f"{name}.txt", out / f"{name}.png"
    text.write_text(console.export_text())
    plot(image)
    print(f"wrote {text} and {image}")


def report_table(
    title: str, columns: Sequence[str], *, left: Collection[str] = (), caption: str | None = None
) -> Table:
    """A table with these columns in order, right-aligned (numbers) except those in `left` (labels)."""
    table = Table(title=title, caption=caption)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    return table


@contextmanager
def figure(path: Path, *grid: int, title: str | None = None, **options: Any) -> Iterator[Any]:
    """The axes of a matplotlib figure as `plt.subplots(*grid, **options)` makes them, drawn off-screen; when
    the block ends, the figure gets `title`, is laid out, written to `path` as a PNG and closed."""
    import matplotlib  # here: only a run that plots needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(*grid, **options)
    try:
        yield axes
        if title is not None:
            fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
