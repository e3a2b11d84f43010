"""How a built table is kept and shown: numbers for parquet, strings for markdown.

A `Table` holds the numeric frame (saved as `<name>.parquet`), the formatted frame it prints as
markdown, and, when it could not be built, the reason (printed instead of rows). The formatters put
numbers the way the paper prints them: "46.07 ± 2.39 (44.4 / 45.0 / 48.8)", "[-3.00, +4.67]".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Table:
    name: str  # file stem: table1, table2a, ...
    title: str
    frame: pd.DataFrame  # numbers: what is saved and what verify rebuilds
    display: pd.DataFrame  # strings: what is printed
    why: str | None = None  # set when the table could not be built
    notes: list[str] = field(default_factory=list)
    # a note that lists many things: {note: (summary, items)}; markdown prints the note, the HTML report folds
    # the items under the summary
    folded: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    # {file name: text} saved beside the table, what it was built from besides the sweep (Table 2B: its contrast
    # rows); None: no such file goes with this build (a stale one is removed)
    side_files: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def unbuilt(cls, name: str, title: str, why: str) -> "Table":
        return cls(name, title, pd.DataFrame(), pd.DataFrame(), why=why)

    def markdown(self) -> str:
        lines = [f"## {self.title}", ""]
        if self.why:
            lines.append(f"Not built: {self.why}")
        else:
            lines.append(to_markdown(self.display))
        if self.notes:
            lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines)


def to_markdown(frame: pd.DataFrame) -> str:
    """A GitHub markdown table of `frame`'s cells as text (no index)."""
    cell = lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v).replace("|", "\\|")  # noqa: E731
    header = [cell(c) for c in frame.columns]
    rows = [[cell(v) for v in row] for row in frame.itertuples(index=False)]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def num(x, nd: int = 2, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"


def tflops(x) -> str:
    """One decimal as in the paper; small models (smoke: 0.15 M parameters) keep 3 significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)) or abs(x) >= 1 or x == 0:
        return num(x, 1)
    return f"{x:.3g}"


def per_seed(values, nd: int = 1, signed: bool = False) -> str:
    return " / ".join(num(v, nd, signed) for v in values)


def mean_sd_text(mean: float, sd: float, values, nd: int = 2, seed_nd: int = 1) -> str:
    """"46.07 ± 2.39 (44.4 / 45.0 / 48.8)"; one value prints alone."""
    if len(values) == 1:
        return num(mean, nd)
    return f"{num(mean, nd)} ± {num(sd, nd)} ({per_seed(values, seed_nd)})"


def ci_text(lo: float, hi: float, nd: int = 2) -> str:
    return f"[{num(lo, nd, True)}, {num(hi, nd, True)}]"
