"""The what-if notebooks (notebooks/*.ipynb) run as committed, with small parameters, through
papermill on a real Jupyter kernel; each is committed with the outputs of its full-size run.

A notebook's cell tagged ``parameters`` holds its full-size parameters and ``OUT``; CASES gives
the small ones CI runs it with, and a check of what that run computed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, nvcc_available

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


CASES: dict[str, tuple[dict, Callable[[Path, dict], None]]] = {
    "jacobi_scaling": ({"N": 1024, "ROWS_PER_GPU": 256, "NITER": 3, "NODES": [1, 2, 4]}, _check_jacobi_scaling),
    "halo_overlap": ({"N": 2048, "NITER": 6}, _check_halo_overlap),
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
