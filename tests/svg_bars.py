"""The bars of a figure `orrery report` wrote, read back from its SVG: each bar's id (the report
gives every bar one, e.g. ``mpi_s-rank3``, ``utilisation0``) and its size in points, so that a
test can check that a figure draws the numbers of its table."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

SVG = "{http://www.w3.org/2000/svg}"
BAR_ID = re.compile(r"\w+-(rank|group)[\d-]+|(kernel|utilisation|busy_fraction)\d+")


def bar_sizes(svg: Path) -> dict[str, tuple[float, float]]:
    """Width and height of each bar, by id: its rectangle's path, from its corners."""
    sizes = {}
    for g in ET.parse(svg).getroot().iter(f"{SVG}g"):
        path = g.find(f"{SVG}path")
        if path is None or not BAR_ID.fullmatch(g.get("id", "")):
            continue
        numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path.get("d", ""))]
        xs, ys = numbers[0::2], numbers[1::2]
        sizes[g.get("id", "")] = (max(xs) - min(xs), max(ys) - min(ys))
    return sizes


def bar_heights(svg: Path) -> dict[str, float]:
    return {name: h for name, (_, h) in bar_sizes(svg).items()}


def bar_widths(svg: Path) -> dict[str, float]:
    """Of horizontal bars: their length."""
    return {name: w for name, (w, _) in bar_sizes(svg).items()}
