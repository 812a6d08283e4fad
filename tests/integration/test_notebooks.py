"""The what-if notebooks run as written (with a short iteration count)."""

import itertools
import json

import pytest
from conftest import REPO, nvcc_available

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]


def test_jacobi_scaling_notebook(tmp_path, capsys, monkeypatch):
    nb = json.loads((REPO / "notebooks" / "jacobi_scaling.ipynb").read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    monkeypatch.chdir(REPO)
    ns: dict = {}
    exec(code[0].replace("NITER = 100", "NITER = 5"), ns)
    ns["OUT"] = tmp_path
    exec(code[1], ns)
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 1 + len(ns["NODES"])
    base = ns["base"]
    assert [b["gpus"] for b in base] == [4, 8, 16, 32]
    # more GPUs, fewer rows each: kernel time per iteration falls, and so does the iteration
    assert all(a["kernel_ms"] > b["kernel_ms"] for a, b in itertools.pairwise(base))
    assert base[-1]["ms_per_iter"] < base[0]["ms_per_iter"]
    # a faster fabric never makes an iteration slower, nor changes kernel time
    for b, f in zip(base, ns["fast"]):
        assert f["ms_per_iter"] <= b["ms_per_iter"]
        assert f["kernel_ms"] == pytest.approx(b["kernel_ms"], rel=1e-9)
