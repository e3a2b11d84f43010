"""How every figure tells the arms apart (seed paper §5.1 Figure 1, §5.3 Figure 2, the training curves): each
arm row of a sweep keeps one colour, one marker and one short tag in all of them.

- Colour: PALETTE, 24 qualitative colours (matplotlib's tab10 less its grey, tab20b's five darks, tab20's
  light halves, a dark grey). Paper arm N takes colour N - 1, so Arm 5 has one colour in every sweep;
  ablations, unnumbered arms and a second row of one number take the colours no numbered row of the sweep
  holds, in the paper's order. Past 24 arm rows the colours repeat.
- Marker: MARKERS[k], k the colour's rank in greyscale (ITU-R 601 luma, PIL's "L") modulo 12, so colours
  of near grey have different markers, and two colours that share a marker differ by >= 0.25 in grey:
  a greyscale print still tells every pair apart.
- Tag: the paper's arm number ("1", "12"), else a letter ("A", "B", ...). Figures write it beside each
  arm's mean where it fits (`place_tags`) and lead the arm's legend entry with it ("A. ablate_skip").
"""

from __future__ import annotations

import string
import textwrap
from dataclasses import dataclass

from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D
from matplotlib.transforms import Bbox

from rlvr_sweep.analysis.source import Sweep, is_paper_number

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
           "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173",
           "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5",
           "#525252")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h", "<", ">", "p", "*")


def grey(colour) -> float:
    """The colour's grey level in [0, 1] once printed in greyscale (ITU-R 601 luma, as PIL's `convert("L")`)."""
    r, g, b = to_rgb(colour)
    return 0.299 * r + 0.587 * g + 0.114 * b


_RANK = {c: k for k, c in enumerate(sorted(PALETTE, key=grey))}
MARKER_OF = {c: MARKERS[_RANK[c] % len(MARKERS)] for c in PALETTE}


@dataclass(frozen=True)
class ArmStyle:
    tag: str  # "5", or "A" for an arm without its own paper number
    colour: str
    marker: str
    legend: str  # the arm's legend entry: its label, led by its tag unless the label starts with its number


def arm_styles(sweep: Sweep) -> dict[str, ArmStyle]:
    """{unit: ArmStyle} of every arm row of the sweep, in the paper's order (module docstring)."""
    units = sweep.units()
    numbers = {u: str(sweep.runs_of(u).iloc[0]["paper_arm"] or "") for u in units}
    slots, tags = {}, {}
    for u in units:  # the first row of each paper number keeps the number's colour and tag
        n = numbers[u]
        if is_paper_number(n) and 1 <= int(n) <= len(PALETTE) and (int(n) - 1) not in slots.values():
            slots[u], tags[u] = int(n) - 1, n
    free = [k for k in range(len(PALETTE)) if k not in slots.values()]
    letters = (a + b for a in ["", *string.ascii_uppercase] for b in string.ascii_uppercase)  # A..Z, AA, AB, ...
    for k, u in enumerate([u for u in units if u not in slots]):
        slots[u] = free[k % len(free)] if free else k % len(PALETTE)
        tags[u] = numbers[u] if is_paper_number(numbers[u]) and numbers[u] not in tags.values() else next(letters)
    out = {}
    for u in units:
        label = sweep.label(u)
        numbered = tags[u] == numbers[u]  # its label already holds the number ("12. stopped_tree h1024")
        colour = PALETTE[slots[u]]
        out[u] = ArmStyle(tags[u], colour, MARKER_OF[colour], label if numbered else f"{tags[u]}. {label}")
    return out


LEGEND_WIDTH = 34  # characters of a legend entry's line: a row named by many changes wraps, never widens the legend


def handle(style: ArmStyle, line: bool = False) -> Line2D:
    """The arm's legend entry: its marker in its colour (on a line of it, `line=True`), black-edged; a long label
    wrapped at spaces."""
    label = textwrap.fill(style.legend, LEGEND_WIDTH, break_long_words=False, subsequent_indent="  ")
    return Line2D([], [], color=style.colour, marker=style.marker, mec="black", mew=0.5, ms=6,
                  lw=1.4 if line else 0, label=label)


# where a tag may sit, in points from its point: right above, right below, left above, left below
RIGHT_OR_LEFT = ((5, 2, "left", "bottom"), (5, -2, "left", "top"), (-5, 2, "right", "bottom"), (-5, -2, "right", "top"))
LEFT = ((-5, 0, "right", "center"), (-5, 5, "right", "bottom"), (-5, -5, "right", "top"))


def place_tags(ax, points: list[tuple[str, float, float, str]], gid: str, offsets=RIGHT_OR_LEFT,
               marker_pt: float = 7.0) -> list[str]:
    """Each point's tag (`(unit, x, y, tag)`, x and y in data units) beside it, gid `<gid>:tag:<unit>`, at
    the first of `offsets` where it stays inside the axes and clear of the other tags and of the other
    points' markers (`marker_pt` wide); a tag with no such place is left out (the legend names every arm).
    Positions are measured once the figure's layout is settled, so draw this last. Returns the units
    tagged."""
    fig = ax.figure
    fig.canvas.draw()  # constrained layout and autoscaled limits settle here
    renderer = fig.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    r = marker_pt / 2 * fig.dpi / 72
    centres = [ax.transData.transform((x, y)) for _, x, y, _ in points]
    markers = [Bbox.from_extents(cx - r, cy - r, cx + r, cy + r) for cx, cy in centres]
    taken: list[Bbox] = []
    tagged = []
    for i, (unit, x, y, tag) in enumerate(points):
        others = taken + markers[:i] + markers[i + 1:]
        for dx, dy, ha, va in offsets:
            text = ax.annotate(tag, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                               gid=f"{gid}:tag:{unit}", annotation_clip=False, zorder=4)
            text.set_in_layout(False)  # a tag never moves the panels it was measured in
            box = text.get_window_extent(renderer).padded(1)
            if (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
                    and not any(box.overlaps(o) for o in others)):
                taken.append(box)
                tagged.append(unit)
                break
            text.remove()
    return tagged
