"""Measured sweeps from files: the measurement CSV and raw benchmark output.

``load(path)`` reads one file and returns its series (one per benchmark,
metric, path and buffers), values in SI units (seconds, bytes/s). Formats,
recognised by their content:

- Orrery's measurement CSV (calibration/README.md), e.g. from
  calibration/harness/orrery_harness.py;
- OSU Micro-Benchmarks output (osu_latency, osu_bw, osu_bibw and the
  collectives' ``Avg Latency(us)``), also printed by calibration/bench, and
  calibration/bench/memcpy_sweep's output in the same layout (copy bandwidth);
- CUDA samples ``bandwidthTest --mode=shmoo`` output (its device-to-device
  figures count each byte twice, read and write: halved);
- NVIDIA nvbandwidth output (one point per testcase: the median over its
  GPU matrix, at the buffer size the output states or nvbandwidth's default
  64 MiB);
- nccl-tests output (out-of-place time per size; ``nccl_tests_table`` both placements);
- BabelStream output (one point per kernel, at the array size it reports).

Bad input stops with an error naming the file and line: unknown format,
missing or unknown units, mixed units in one series, values that are not
positive finite numbers, sizes that are not whole numbers (0 or more; more
than 0 for a bandwidth) or do not increase, a file with no measurements (a
header without rows); and, in ``orrery calibrate``, a sweep with too few sizes
for a fit.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..schema import read_text

# unit -> (factor to SI, SI unit)
UNITS = {
    "us": (1e-6, "s"),
    "ms": (1e-3, "s"),
    "s": (1.0, "s"),
    "MB/s": (1e6, "B/s"),
    "GB/s": (1e9, "B/s"),
}


@dataclass
class Series:
    source: str
    benchmark: str
    metric: str  # latency, bandwidth, bibw, copy_bandwidth, collective_latency, kernel_time
    path: str
    buffers: str
    unit: str  # of the file; values below are SI
    sizes: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    ranks: int | None = None  # how many ranks and nodes ran it, where the file says
    nodes: int | None = None
    one_size: bool = False  # the format measures one size per testcase (nvbandwidth): compared, not fitted

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.benchmark, self.metric, self.path, self.buffers

    def add(self, size: int, value: float, unit: str, line: int) -> None:
        if not (math.isfinite(value) and value > 0):
            raise InputError(
                f"{self.source}:{line}",
                "value",
                value,
                "a positive finite measurement (a time or a rate of 0, a negative one, nan or inf is no measurement)",
            )
        if size == 0 and UNITS.get(unit, (0, ""))[1] == "B/s":
            raise InputError(f"{self.source}:{line}", "size", size, "a size of 1 byte or more for a bandwidth")
        if unit not in UNITS:
            raise InputError(f"{self.source}:{line}", "unit", unit, f"one of {', '.join(UNITS)}")
        if unit != self.unit:
            raise InputError(
                f"{self.source}:{line}",
                "unit",
                unit,
                f"the unit of the series' earlier rows ({self.unit}): units may not be mixed",
            )
        if self.sizes and size <= self.sizes[-1]:
            raise InputError(
                f"{self.source}:{line}",
                "size",
                size,
                f"a size larger than the previous one ({self.sizes[-1]}): sizes must increase",
            )
        self.sizes.append(size)
        self.values.append(value * UNITS[unit][0])
        self.lines.append(line)


def _number(text: str | None, source: str, line: int, what: str) -> float:
    if text is not None:  # None: a short CSV row's missing cell
        try:
            return float(text)
        except ValueError:
            pass
    raise InputError(f"{source}:{line}", what, text, "a number")


def _whole(text: str | None, source: str, line: int, what: str, least: int = 0) -> int:
    """A size or count: a whole number, `least` or more."""
    x = _number(text, source, line, what)
    if not (math.isfinite(x) and x == int(x) and x >= least):
        raise InputError(f"{source}:{line}", what, text, f"a whole number, {least} or more")
    return int(x)


def _measurement_csv(path: Path, text: str) -> list[Series]:
    series: dict[tuple, Series] = {}
    reader = csv.DictReader(text.splitlines())
    for i, row in enumerate(reader, start=2):
        unit = (row.get("unit") or "").strip()
        if not unit:
            raise InputError(f"{path}:{i}", "unit", unit, f"one of {', '.join(UNITS)} (a value without a unit)")
        key = (row["benchmark"], row["metric"], row["path"], row["buffers"])
        s = series.setdefault(key, Series(str(path), *key, unit=unit))
        for column in ("ranks", "nodes"):
            if (row.get(column) or "").strip():
                n = _whole(row[column], str(path), i, column, least=1)
                if getattr(s, column) not in (None, n):
                    raise InputError(
                        f"{path}:{i}",
                        column,
                        n,
                        f"{getattr(s, column)}, as in the series' earlier rows (one series, one layout)",
                    )
                setattr(s, column, n)
        size = _whole(row["size_bytes"], str(path), i, "size_bytes")
        s.add(size, _number(row["value"], str(path), i, "value"), unit, i)
    return list(series.values())


# MPI collectives by the words OSU's titles (and calibration/bench/coll_sweep's) use for them,
# and the harness's names: the name calibration/bench/coll_sweep takes. Whole words only, so
# that the v-variants (All-to-Allv, Allgatherv) and Reduce_scatter_block are not taken for them
_COLLECTIVES = {
    "all-to-all": "alltoall",
    "alltoall": "alltoall",
    "allreduce": "allreduce",
    "allgather": "allgather",
    "broadcast": "bcast",
    "bcast": "bcast",
    "reduce_scatter": "reduce_scatter",
    "reduce-scatter": "reduce_scatter",
}
_COLLECTIVE_WORD = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, _COLLECTIVES)) + r")(?![\w-])")


def collective_of(benchmark: str) -> str | None:
    """The blocking MPI collective a series measured (coll_sweep's name for it), from its
    benchmark's name or title; None for anything else: nccl-tests (NCCL is not MPI), OSU's
    non-blocking collectives, collectives coll_sweep does not run."""
    low = benchmark.lower()
    if "nccl" in low or "non-blocking" in low:
        return None
    found = _COLLECTIVE_WORD.search(low)
    return _COLLECTIVES[found.group(1)] if found else None


# the first value column's name and unit; later columns (osu_* -f's Min/Max/Iterations, Messages/s,
# --validation's Pass/Fail) are left out
_OSU_HEADER = re.compile(
    r"^#\s*Size\s+(Avg Latency|Latency|Bandwidth|Bi-Bandwidth)\s*(?:\(\s*([^)\s]*)\s*\)|(\S*))"
    r"(?:\s.*)?$"
)


def _osu(path: Path, text: str) -> list[Series]:
    lines = text.splitlines()
    title = next((ln for ln in lines if ln.startswith("# OSU")), "# OSU")
    # "# Send Buffer on DEVICE (D) and Receive Buffer on HOST (H)": D H (without -d cuda: H H)
    sides = re.search(r"Send Buffer on \w+ \((\w)\) and Receive Buffer on \w+ \((\w)\)", text)
    buffers = f"{sides.group(1)} {sides.group(2)}" if sides else "D D" if "DEVICE (D)" in text else "H H"
    copy = re.search(r"^# memcpy (h2d|d2h|d2d|peer) sweep", text, re.M)  # calibration/bench/memcpy_sweep
    direction = {"h2d": "H2D", "d2h": "D2H", "d2d": "D2D", "peer": "peer"}[copy.group(1)] if copy else ""
    if copy:
        title, buffers = "# memcpy_sweep", "pinned" if direction in ("H2D", "D2H") else "D D"
    s, other = None, None
    for i, ln in enumerate(lines, start=1):
        m = _OSU_HEADER.match(ln)
        if not m and re.match(r"^#\s*Size\s", ln):
            other = other or (i, ln.strip())  # e.g. osu_mbw_mr's "# Size MB/s Messages/s"
        if m:
            kind, unit = m.group(1), m.group(2) or m.group(3) or ""
            if not unit:
                raise InputError(f"{path}:{i}", "unit", ln.strip(), "a unit in the column header, e.g. Latency (us)")
            metric = (
                "copy_bandwidth"
                if copy
                else {
                    "Avg Latency": "collective_latency",
                    "Latency": "latency",
                    "Bandwidth": "bibw" if "Bi-Directional" in title else "bandwidth",
                    "Bi-Bandwidth": "bibw",
                }[kind]
            )
            s = Series(str(path), title.lstrip("# ").strip(), metric, direction, buffers, unit=unit)
            if metric == "collective_latency":
                # OSU's CUDA collectives say so in their title; calibration/bench/coll_sweep's
                # title also says how many ranks ran it
                s.buffers = "D" if "MPI-CUDA" in title else "H"
                ranks = re.search(r", (\d+) ranks", title)
                if ranks:
                    s.ranks = int(ranks.group(1))
                    s.path = f"{s.ranks} ranks"
            continue
        if s is None or not ln.strip() or ln.startswith("#"):
            continue
        parts = ln.split()
        if len(parts) < 2:
            raise InputError(f"{path}:{i}", "row", ln.strip(), "a size and a value")
        s.add(_whole(parts[0], str(path), i, "size"), _number(parts[1], str(path), i, "value"), s.unit, i)
    if s is None and other:
        raise InputError(
            f"{path}:{other[0]}",
            "columns",
            other[1],
            "Latency, Avg Latency, Bandwidth or Bi-Bandwidth after Size, with its unit (osu_latency, "
            "osu_bw, osu_bibw and the collectives' output; other OSU benchmarks are not supported)",
        )
    if s is None:
        raise InputError(str(path), None, "no '# Size ...' header", "OSU benchmark output")
    return [s]


def _bandwidth_test(path: Path, text: str) -> list[Series]:
    out, s, direction = [], None, None
    for i, ln in enumerate(text.splitlines(), start=1):
        low = ln.strip().lower()
        for name, d in (("host to device", "H2D"), ("device to host", "D2H"), ("device to device", "D2D")):
            if low.startswith(name):
                direction = d
        m = re.search(r"Transfer Size \(Bytes\)\s+Bandwidth\s*\((\w+/s)\)", ln)
        if m:
            if direction is None:
                raise InputError(
                    f"{path}:{i}",
                    "direction",
                    ln.strip(),
                    "a 'Host to Device Bandwidth' (or D2H, D2D) title before the table",
                )
            s = Series(str(path), "bandwidthTest", "copy_bandwidth", direction, "pinned", unit=m.group(1))
            out.append(s)
            continue
        parts = ln.split()
        if s is not None and len(parts) == 2 and parts[0].isdigit():
            # bandwidthTest counts a device-to-device copy's bytes twice (read and write): once here,
            # as Orrery's copy models and calibration/bench/memcpy_sweep do
            once = 0.5 if direction == "D2D" else 1.0
            s.add(int(parts[0]), once * _number(parts[1], str(path), i, "bandwidth"), s.unit, i)
        elif s is not None and ln.strip() == "":
            s = None
    if not out:
        raise InputError(str(path), None, "no 'Transfer Size (Bytes) Bandwidth(GB/s)' table", "bandwidthTest output")
    return out


NVBANDWIDTH_DEFAULT_BUFFER = 64 * 1024 * 1024  # nvbandwidth --bufferSize default (its README)
# testcase name prefix -> (metric, path): copies through copy engines (ce) or SMs (sm)
_NVBANDWIDTH_TESTS = (
    ("host_to_device_bidirectional", ("copy_bidirectional", "H2D")),
    ("device_to_host_bidirectional", ("copy_bidirectional", "D2H")),
    ("device_to_device_bidirectional", ("copy_bidirectional", "peer")),
    ("host_to_device", ("copy_bandwidth", "H2D")),
    ("device_to_host", ("copy_bandwidth", "D2H")),
    ("device_to_device", ("copy_bandwidth", "peer")),
    ("all_to_host", ("copy_bandwidth", "D2H all")),
    ("host_to_all", ("copy_bandwidth", "H2D all")),
    ("all_to_one", ("copy_bandwidth", "peer all-to-one")),
    ("one_to_all", ("copy_bandwidth", "peer one-to-all")),
)


def _nvbandwidth(path: Path, text: str) -> list[Series]:
    size_line = re.search(r"buffer\s*size\D{0,12}?(\d+)", text, re.I)
    size = int(size_line.group(1)) if size_line else NVBANDWIDTH_DEFAULT_BUFFER
    out: list[Series] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"\s*Running (\w+)\.?\s*$", lines[i])
        i += 1
        if not m:
            continue
        test = m.group(1)
        kind = next((k for prefix, k in _NVBANDWIDTH_TESTS if test.startswith(prefix)), None)
        if kind is None:
            continue  # latency testcases and others with no copy bandwidth
        # the matrix title (with its unit), a line of column indices, then one row per source
        while i < len(lines) and "bandwidth" not in lines[i].lower():
            if lines[i].startswith("Running "):
                break
            i += 1
        unit = re.search(r"\((\w+/s)\)", lines[i]) if i < len(lines) else None
        if not unit:
            raise InputError(
                f"{path}:{i + 1}",
                "unit",
                lines[i].strip() if i < len(lines) else "end of file",
                f"a '... bandwidth (GB/s)' title after 'Running {test}.'",
            )
        i += 2
        values, first = [], i + 1
        while i < len(lines) and re.match(r"\s*\d+\s", lines[i]):
            for cell in lines[i].split()[1:]:
                if cell != "N/A":
                    values.append(_number(cell, str(path), i + 1, "bandwidth"))
            i += 1
        if not values:
            raise InputError(f"{path}:{first}", "matrix", test, "at least one measured (not N/A) entry")
        metric, direction = kind
        s = Series(str(path), f"nvbandwidth {test}", metric, direction, "pinned", unit=unit.group(1), one_size=True)
        s.add(size, sorted(values)[len(values) // 2], unit.group(1), first)
        out.append(s)
    if not out:
        raise InputError(str(path), None, "no 'Running <testcase>.' with a bandwidth matrix", "nvbandwidth output")
    return out


NCCL_PLACEMENTS = ("out-of-place", "in-place")


def nccl_tests_table(path: Path, text: str) -> dict[str, Series]:
    """nccl-tests' table (also calibration/bench/nccl_sweep's): a series of time per size for
    each placement it prints, out-of-place and in-place (path), values in seconds. A row is
    size count type redop root, then time algbw busbw #wrong per placement; the in-place series
    is left out where no row has its columns (the table cut after out-of-place)."""
    name = re.search(r"^#\s*Collective test starting:\s*(\S+)", text, re.M)
    benchmark = f"nccl-tests {name.group(1) if name else ''}".strip()
    table = {p: Series(str(path), benchmark, "collective_latency", p, "D", unit="us") for p in NCCL_PLACEMENTS}
    for i, ln in enumerate(text.splitlines(), start=1):
        parts = ln.split()
        if ln.startswith("#") or len(parts) < 8 or not parts[0].isdigit():
            continue
        table["out-of-place"].add(int(parts[0]), _number(parts[5], str(path), i, "time"), "us", i)
        if len(parts) >= 12:
            table["in-place"].add(int(parts[0]), _number(parts[9], str(path), i, "in-place time"), "us", i)
    if not table["out-of-place"].sizes:
        raise InputError(str(path), None, "no result rows", "nccl-tests output")
    return {p: s for p, s in table.items() if s.sizes}


def _nccl_tests(path: Path, text: str) -> list[Series]:
    return [nccl_tests_table(path, text)["out-of-place"]]


def _babelstream(path: Path, text: str) -> list[Series]:
    m = re.search(r"Array size:\s*([\d.]+)\s*MB", text)
    if not m:
        raise InputError(str(path), None, "no 'Array size: N MB' line", "BabelStream output")
    size = round(_number(m.group(1), str(path), text[: m.start()].count("\n") + 1, "array size") * 1e6)
    out = []
    for i, ln in enumerate(text.splitlines(), start=1):
        parts = ln.split()
        if len(parts) >= 5 and parts[0] in ("Copy", "Mul", "Add", "Triad", "Dot", "Nstream"):
            unit = "MB/s" if "MBytes/sec" in text else "GB/s"
            s = Series(str(path), f"BabelStream {parts[0]}", "kernel_bandwidth", "GPU", "D", unit=unit)
            s.add(size, _number(parts[1], str(path), i, "bandwidth"), unit, i)
            out.append(s)
    if not out:
        raise InputError(str(path), None, "no kernel rows (Copy, Mul, Add, Triad, Dot)", "BabelStream output")
    return out


def load(path: str | Path) -> list[Series]:
    p = Path(path)
    series = _read(p, read_text(p, "a measurement file"))
    if not series or not all(s.sizes for s in series):
        empty = next((s for s in series if not s.sizes), None)
        raise InputError(
            str(p),
            None,
            f"no measurements{f' in {empty.benchmark}' if empty else ''}",
            "rows of measurements (a size and a value each) below the header",
        )
    return series


def _read(p: Path, text: str) -> list[Series]:
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    if first.startswith("benchmark,metric,path,buffers,size_bytes,value,unit"):
        return _measurement_csv(p, text)
    if "# OSU" in text or _OSU_HEADER.search(text.replace("\r", "")) or re.search(r"^#\s*Size\s", text, re.M):
        return _osu(p, text)
    if "nvbandwidth" in text.lower() or re.search(r"^Running \w+_memcpy_(ce|sm)\.", text, re.M):
        return _nvbandwidth(p, text)
    if "Transfer Size (Bytes)" in text:
        return _bandwidth_test(p, text)
    if "nccl-tests" in text.lower() or "#wrong" in text:
        return _nccl_tests(p, text)
    if "BabelStream" in text:
        return _babelstream(p, text)
    raise InputError(
        str(p),
        None,
        first[:40] or "an empty file",
        "a measurement CSV or OSU, bandwidthTest, nvbandwidth, nccl-tests or BabelStream output",
    )
