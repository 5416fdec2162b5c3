"""bench._report.publish writes exactly what it prints (the tables, then the notes verbatim) to NAME.txt, has
the plot drawn to NAME.png, and writes nothing else; report_table aligns labels left and numbers right; figure
writes its plot as a PNG and closes it, and writes nothing when the drawing fails."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from rich.console import Console
from rich.table import Table

from bench._report import figure, publish, report_table

WIDTH = 60
NOTE = "target [b] met: 3.2x"  # brackets that rich would read as markup


def rendered(table: Table) -> str:
    console = Console(file=io.StringIO(), width=WIDTH, record=True)
    console.print(table)
    return console.export_text()


def test_publish_writes_the_tables_and_notes_and_has_the_plot_drawn(tmp_path: Path) -> None:
    table = Table("setup", "tokens/s", title="speed")
    table.add_row("engine", "3,400")
    plotted: list[Path] = []

    def plot(path: Path) -> None:
        plotted.append(path)
        path.write_bytes(b"png")

    publish("demo", [table], width=WIDTH, notes=[NOTE], plot=plot, out=tmp_path)

    assert (tmp_path / "demo.txt").read_text() == rendered(table) + NOTE + "\n"
    assert "│ engine │ 3,400    │" in rendered(table)
    assert plotted == [tmp_path / "demo.png"]
    assert sorted(tmp_path.iterdir()) == [tmp_path / "demo.png", tmp_path / "demo.txt"]


def test_report_table_has_the_columns_in_order_labels_left_and_numbers_right() -> None:
    table = report_table(
        "speed", ("setup", "tokens/s", "mode", "ratio"), left=("setup", "mode"), caption="note"
    )

    assert [(column.header, column.justify) for column in table.columns] == [
        ("setup", "left"),
        ("tokens/s", "right"),
        ("mode", "left"),
        ("ratio", "right"),
    ]
    assert (table.title, table.caption) == ("speed", "note")
    assert report_table("bare", ("n",)).caption is None


def test_figure_writes_the_plot_as_a_png_and_closes_it(tmp_path: Path) -> None:
    path = tmp_path / "plot.png"
    with figure(path, 1, 2, figsize=(4, 2), title="two panels") as (left, right):
        left.plot([0, 1], [1, 0])
        right.bar(["a", "b"], [2, 3])
        (number,) = plt.get_fignums()
        drawn = plt.figure(number)

    assert drawn.get_suptitle() == "two panels"
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert plt.get_fignums() == []


def test_a_figure_whose_drawing_fails_writes_nothing_and_is_closed(tmp_path: Path) -> None:
    path = tmp_path / "plot.png"
    with pytest.raises(ZeroDivisionError), figure(path, figsize=(4, 2)) as ax:
        ax.plot([0, 1], [1 / 0, 0])

    assert not path.exists()
    assert plt.get_fignums() == []
