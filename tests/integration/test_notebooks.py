"""The what-if notebooks (notebooks/*.ipynb) run as committed, with small parameters, through
papermill on a real Jupyter kernel; each is committed with the outputs of its full-size run.

A notebook's cell tagged ``parameters`` holds its full-size parameters and ``OUT``; CASES gives
the small ones CI runs it with, and a check of what that run computed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, nvcc_available, voltage_park_copies

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]

NOTEBOOKS = REPO / "notebooks"


def _outputs(nb: dict) -> list[str]:
    """Each code cell's text output (stdout and results), in order."""
    texts = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        parts = []
        for out in cell.get("outputs", []):
            if out["output_type"] == "stream":
                parts.append("".join(out["text"]))
            elif "data" in out and "text/plain" in out["data"]:
                parts.append("".join(out["data"]["text/plain"]))
        texts.append("".join(parts))
    return texts


def _check_jacobi_scaling(out: Path, nb: dict) -> None:
    import pandas as pd

    strong = pd.read_csv(out / "strong" / "sweep.csv")
    weak = pd.read_csv(out / "weak" / "sweep.csv")
    assert list(strong["gpus"]) == [4, 8, 16] == list(weak["gpus"])
    assert (strong["status"] == "completed").all() and (weak["status"] == "completed").all()
    # strong scaling: more GPUs, fewer rows each, so less kernel time per rank (on a grid this small
    # the run itself gets longer: the halos now cross the fabric), and efficiency as defined
    assert strong["kernel_mean_s"].is_monotonic_decreasing and strong["kernel_mean_s"].is_unique
    t = strong["makespan_s"]
    assert strong["efficiency"].to_list() == pytest.approx([t[0] / t[i] * 4 / g for i, g in enumerate(strong["gpus"])])
    # weak scaling: the same rows per GPU, so the same kernel time per rank at every size
    assert weak["kernel_mean_s"].to_list() == pytest.approx([weak["kernel_mean_s"][0]] * 3, rel=1e-9)
    answer = _outputs(nb)[-1]
    eff = strong["efficiency"].iloc[-1]
    assert f"{100 * eff:.0f}%" in answer and "16 GPUs" in answer


def _check_halo_overlap(out: Path, nb: dict) -> None:
    import orrery

    plain, overlap = orrery.load(out / "plain"), orrery.load(out / "overlap")
    assert plain.run["program"][-1] != "-overlap" and overlap.run["program"][-1] == "-overlap"
    # the overlapped variant computes the interior while the halo is exchanged: more of it hidden
    share = {
        name: sum(r.comm_hidden_s for r in res.ranks) / sum(r.comm_s for r in res.ranks)
        for name, res in (("plain", plain), ("overlap", overlap))
    }
    assert share["overlap"] > share["plain"]
    answer = _outputs(nb)[-1]
    assert f"Plain: {100 * share['plain']:.0f}% of the communication is hidden" in answer
    assert f"with -overlap: {100 * share['overlap']:.0f}%" in answer
    # the traces keep ranks 3 and 4 only, and the timeline excerpts are figures
    for res in (plain, overlap):
        names = {
            e["args"]["name"]
            for e in json.loads((res.out / "trace.json").read_text())["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"].startswith("rank")
        }
        assert names == {"rank 3 (node 0)", "rank 4 (node 1)"}


def _check_whatif_fabric(out: Path, nb: dict) -> None:
    import pandas as pd

    table = pd.read_csv(out / "sweep.csv")
    assert (table["status"] == "completed").all() and len(table) == 7
    overrides = ["set.nic.bandwidth", "set.gpudirect.rdma", "set.nvlink.topology", "set.nic.per_node"]
    base = table[table[overrides].isna().all(axis=1)]
    assert len(base) == 1  # the machine as described, 200 Gb/s: one point
    span = float(base["makespan_s"].iloc[0])
    # every variant runs the same kernels for the same time: the machine's links do not change them
    assert table["kernel_mean_s"].to_list() == pytest.approx([base["kernel_mean_s"].iloc[0]] * 7, rel=1e-9)
    # a faster fabric never gives a longer run
    fabric = table.dropna(subset=["set.nic.bandwidth"])
    rates = {int(b.removesuffix("Gb/s")): float(m) for b, m in zip(fabric["set.nic.bandwidth"], fabric["makespan_s"])}
    spans = [m for _, m in sorted({**rates, 200: span}.items())]
    assert sorted(rates) == [100, 400, 800] and spans == sorted(spans, reverse=True)
    # each variant as the notebook names it, with its makespan
    variants = {f"nic.bandwidth={b}Gb/s": m for b, m in rates.items()}
    for key in overrides[1:]:
        row = table.dropna(subset=[key])
        assert len(row) == 1
        value = row[key].iloc[0]  # the CSV reads nic.per_node's column, blank elsewhere, as floats
        value = int(value) if isinstance(value, float) else value
        variants[f"{key.removeprefix('set.')}={value}"] = float(row["makespan_s"].iloc[0])
    # GPUDirect off (staging through host memory), NVLink removed, one NIC shared: none is faster
    for name in ("gpudirect.rdma=False", "nvlink.topology=none", "nic.per_node=1"):
        assert variants[name] >= span, name
    # the answer gives every variant's makespan and change, those over 1% first, largest first
    answer = _outputs(nb)[-1]
    assert f"{span * 1e3:.3f} ms as described" in answer
    change = {name: m / span - 1 for name, m in variants.items()}
    matters = sorted((n for n in change if abs(change[n]) > 0.01), key=lambda n: -abs(change[n]))
    assert matters, "at this size GPUDirect off alone costs more than 1%"
    lines = answer.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Matters"))
    assert [line.split(":")[0].strip() for line in lines[start + 1 : start + 1 + len(matters)]] == matters
    for n in matters:
        assert f"  {n}: {variants[n] * 1e3:.3f} ms ({change[n]:+.1%})" in answer
    rest = next(line for line in lines if line.startswith("Does not matter"))
    for n in set(change) - set(matters):
        assert f"{n} ({variants[n] * 1e3:.3f} ms, {change[n]:+.2%})" in rest


def _check_calibration(out: Path, nb: dict) -> None:
    import numpy as np
    import pandas as pd

    terms = pd.read_csv(out / "terms.csv")
    medians = {}
    for variant in ("built-in", "calibrated"):
        sweeps = json.loads((out / variant / "h100-ib200" / "validation.json").read_text())["sweeps"]
        expected = [
            voltage_park_copies("memcpy host->device", 1.0),
            voltage_park_copies("memcpy device->host", 1.0),
            voltage_park_copies("memcpy device->device (same GPU)", 0.5),  # bandwidthTest counts D2D bytes twice
        ]
        assert [dict(zip(s["sizes"], s["measured"])) for s in sweeps] == expected
        errors = [(sim - meas) / meas for s in sweeps for sim, meas in zip(s["simulated"], s["measured"])]
        assert [e for s in sweeps for e in s["errors"]] == pytest.approx(errors, rel=1e-12)
        # the copies term pools the three sweeps' 243 sizes; h100-ib200 has no other measurement
        rows = terms[terms["variant"] == variant].set_index("term")
        copies = rows.loc["copies"]
        size = np.abs(errors)
        assert (copies["sweeps"], copies["points"]) == (3, 243)
        assert copies["median_abs_error"] == pytest.approx(np.median(size), rel=1e-12)
        assert copies["p95_abs_error"] == pytest.approx(np.percentile(size, 95), rel=1e-12)
        assert copies["max_abs_error"] == pytest.approx(size.max(), rel=1e-12)
        assert copies["worst_error"] == pytest.approx(errors[int(np.argmax(size))], rel=1e-12)
        others = rows.drop(index="copies")
        assert set(others.index) == {
            "point-to-point latency",
            "point-to-point bandwidth",
            "collectives",
            "API overheads",
        }
        assert (others["points"] == 0).all() and others["median_abs_error"].isna().all()
        medians[variant] = float(copies["median_abs_error"])
        answer = _outputs(nb)[-1]
        line = next(line for line in answer.splitlines() if line.startswith(f"  h100-ib200, {variant}:"))
        assert f"copies {medians[variant]:.1%} ({copies['p95_abs_error']:.1%}, {size.max():.1%})" in line
        assert line.endswith(
            "no measurement of point-to-point latency, point-to-point bandwidth, collectives, API overheads"
        )
    # the committed calibration was fitted to these sweeps: it is closer than the vendor description
    assert medians["calibrated"] < medians["built-in"]
    # the only machine's only term is the worst of each variant
    assert f"Worst built-in (over every sweep): h100-ib200's copies, median {medians['built-in']:.1%}, " in answer


CASES: dict[str, tuple[dict, Callable[[Path, dict], None]]] = {
    "jacobi_scaling": ({"N": 1024, "ROWS_PER_GPU": 256, "NITER": 3, "NODES": [1, 2, 4]}, _check_jacobi_scaling),
    "halo_overlap": ({"N": 2048, "NITER": 6}, _check_halo_overlap),
    "whatif_fabric": ({"NODES": 4, "N": 512, "NITER": 3}, _check_whatif_fabric),
    "calibration": (
        {"MACHINES": ["h100-ib200"], "CALIBRATIONS": {"h100-ib200": "../calibration/h100-ib200/calibration.json"}},
        _check_calibration,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_notebook_runs_with_small_parameters(name, tmp_path):
    import papermill

    params, check = CASES[name]
    executed = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(executed),
        parameters={**params, "OUT": str(tmp_path / "out")},
        cwd=str(NOTEBOOKS),
        kernel_name="python3",
        progress_bar=False,
        log_output=False,
    )
    check(tmp_path / "out", json.loads(executed.read_text()))


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_notebook_is_committed_executed_with_its_figures(path):
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    assert path.stem in CASES, f"{path.name} has no small-parameter run in CASES"
    assert cells[0]["cell_type"] == "markdown" and "?" in "".join(cells[0]["source"]), "states its question first"
    tagged = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and "OUT" in "".join(tagged[0]["source"])
    code = [c for c in cells if c["cell_type"] == "code"]
    # executed top to bottom in one session, every code cell with its count, none failed
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    # figures visible on GitHub: PNG outputs; and the answer printed by the last cell
    assert any("image/png" in o.get("data", {}) for c in code for o in c["outputs"])
    assert cells[-1]["cell_type"] == "code" and _outputs(nb)[-1].strip()
    # no logic of its own: no function or class defined in a notebook
    assert not [c for c in code if any(line.lstrip().startswith(("def ", "class ")) for line in c["source"])]
