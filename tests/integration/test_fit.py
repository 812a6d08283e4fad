"""`orrery fit`: a program's cost parameters fitted to measured run times, simulator in the loop."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess

import pytest
from conftest import ORRERY, REPO, nvcc_available, orrery

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """A copy of examples/jacobi, built, with its fit spec (its CSV path made absolute)."""
    d = tmp_path_factory.mktemp("jacobi")
    for f in ("jacobi.cu", "Makefile", "fit.toml"):
        shutil.copy(REPO / "examples" / "jacobi" / f, d / f)
    spec = (d / "fit.toml").read_text().replace('"../../calibration/', f'"{REPO}/calibration/')
    (d / "fit.toml").write_text(spec)
    subprocess.run(["make", "-s", f"NVCC={ORRERY} nvcc", f"MPICXX={ORRERY} mpicxx"], cwd=d, check=True)
    return d


def test_jacobi_single_gpu_rows_are_matched_and_the_committed_costs_reproduced(example, tmp_path):
    p = orrery("fit", str(example / "fit.toml"), "--out", str(tmp_path / "fit"))
    assert p.returncode == 0, p.stderr
    result = json.loads((tmp_path / "fit" / "fit.json").read_text())
    # the target: each measured grid's time per iteration within 5 % (it is far closer)
    assert len(result["runs"]) == 3
    for run in result["runs"]:
        assert abs(run["relative_error"]) < 0.005, run
    assert result["simulations"] >= 3 * result["optimizer"]["evaluations"]  # every evaluation ran every run
    # the committed cost file holds these values (same inputs, same fit)
    committed = (REPO / "examples" / "jacobi" / "costs.toml").read_text()
    for name, value in result["parameters"].items():
        assert f"{name} = {value!r}" in committed
    assert "max |relative error|" in p.stdout


def test_parameters_a_simulation_was_made_with_are_recovered(example, tmp_path):
    """Closed loop: 'measured' figures simulated with known alpha and beta are fitted back."""
    alpha, beta = 20e-6, 3e-12
    made = tmp_path / "made.toml"
    made.write_text(
        f'[kernels.jacobi_kernel]\nalpha = {alpha!r}\nbeta = {beta!r}\n[kernels.initialize_boundaries]\ntime = "5us"\n'
    )
    figures = []
    for nx in (4096, 8192, 16384):
        r = orrery(
            "run",
            "--gpus-per-node",
            "1",
            "--costs",
            str(made),
            "--out",
            str(tmp_path / f"m{nx}"),
            "--",
            str(example / "jacobi"),
            "-nx",
            str(nx),
            "-ny",
            str(nx),
            "-niter",
            "10",
        )
        assert r.returncode == 0, r.stderr
        figures.append(float(next(ln for ln in r.stdout.splitlines() if ln.startswith("time:")).split()[1]) / 10)
    spec = (example / "fit.toml").read_text()
    head = spec[: spec.index("[measured]")]
    runs = "".join(
        f'\n[[runs]]\nargs = ["-nx", "{nx}", "-ny", "{nx}", "-niter", "10"]\nper = 10\nmeasured = {t!r}\n'
        for nx, t in zip((4096, 8192, 16384), figures)
    )
    (example / "synthetic.toml").write_text(head + runs)
    p = orrery("fit", str(example / "synthetic.toml"), "--out", str(tmp_path / "fit"))
    assert p.returncode == 0, p.stderr
    fitted = json.loads((tmp_path / "fit" / "fit.json").read_text())["parameters"]
    assert fitted["alpha"] == pytest.approx(alpha, rel=1e-3)
    assert fitted["beta"] == pytest.approx(beta, rel=1e-3)


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda s: s.replace('grid_nx = "8192"', 'grid_nx = "1234"'),
            r"runs\[0\]\.row.*exactly one row of .*jacobi_scaling.csv containing these values \(found 0\)",
        ),
        (
            lambda s: s.replace("beta = {beta}", "beta = 1e-12"),
            r"key 'costs'.*exactly the fitted parameters \['alpha', 'beta'\] as \{name\}",
        ),
        (
            lambda s: s.replace('program = "jacobi"', 'program = "missing"'),
            r"key 'program'.*'missing'.*an existing program built with Orrery's wrappers",
        ),
        (
            lambda s: s.replace('initial = "10us"', 'initial = "10 parsecs"'),
            r"key 'parameters.alpha.initial'.*'10 parsecs'.*a time such as 2.5us",
        ),
        (lambda s: s + "\n[[runs]]\nargs = []\n", r"key 'runs.3'.*either measured \(a value\) or row"),
        (
            lambda s: s.replace('time = "5us"', '{ time = "5us" }'),
            r"key 'costs'.*only braces are \{name\} placeholders",
        ),
        (lambda s: s.replace('time = "5us"', 'time = "5 parsecs"'), r"key 'costs'.*a valid cost file once filled in"),
        (lambda s: s.replace('unit = "s"', 'unit = "furlongs"'), r"key 'measured.unit'.*'furlongs'"),
    ],
)
def test_bad_specs_name_file_key_and_value(example, tmp_path, edit, message):
    bad = example / "bad.toml"
    bad.write_text(edit((example / "fit.toml").read_text()))
    p = orrery("fit", str(bad), "--out", str(tmp_path / "o"))
    assert p.returncode == 2, p.stdout
    assert "bad.toml" in p.stderr
    assert re.search(message, p.stderr), p.stderr


QUICK_FIT = """
program = "{program}"
machine = "h100-ib200"
gpus_per_node = 1
figure = '^time:\\s+(\\S+) s'
costs = '''
[kernels.jacobi_kernel]
alpha = {{alpha}}
beta = 0.0
[kernels.initialize_boundaries]
time = "5us"
'''
[parameters.alpha]
initial = "10us"
min = "0s"

[[runs]]
args = ["-nx", "256", "-ny", "256", "-niter", "3"]
per = 3
measured = "30us"
"""


def fit_with_stderr_on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """`orrery ARGS` with its stderr a pseudo-terminal and its stdout a pipe. The terminal does
    not say its size (0 x 0), as under `script` in CI: the bar must show all the same."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([ORRERY, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:  # until the command closes the terminal (Linux: EIO once no one holds it)
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.stdout is not None
    stdout = proc.stdout.read().decode()
    return proc.wait(), stdout, seen.decode(errors="replace")


def test_fit_shows_a_bar_on_a_terminal_none_in_a_pipe_and_its_steps_with_verbose(example, tmp_path):
    spec = tmp_path / "quick.toml"
    spec.write_text(QUICK_FIT.format(program=example / "jacobi"))
    code, tty_out, tty_err = fit_with_stderr_on_a_terminal(["fit", str(spec), "--out", str(tmp_path / "a")])
    assert code == 0, tty_err
    # tqdm's bar: the command's name, evaluations counted, redrawn in place with carriage returns
    assert re.search(r"fit: [1-9]\d* evaluations \[", tty_err) and "\r" in tty_err and "max |error|" in tty_err
    assert "orrery: evaluation" not in tty_err  # info only with -v
    quiet = orrery("fit", str(spec), "--out", str(tmp_path / "b"))
    assert (quiet.returncode, quiet.stderr) == (0, "")  # not a terminal: no bar, no messages
    loud = orrery("fit", str(spec), "--out", str(tmp_path / "c"), "-v")
    assert loud.returncode == 0
    result = json.loads((tmp_path / "c" / "fit.json").read_text())
    # one line per optimiser evaluation (each one run): every simulation but the fitted values' own
    lines = loud.stderr.splitlines()
    evaluations = [line for line in lines if line.startswith("orrery: evaluation ")]
    assert len(evaluations) == result["simulations"] - 1
    assert re.fullmatch(
        r"orrery: evaluation 1 \(1 run\): alpha = 1e-05: max \|relative error\| \d+\.\d\d%", evaluations[0]
    )
    assert lines[-1].startswith("orrery: optimiser done (") and "\r" not in loud.stderr
    # what the command prints on stdout (its results) is the same, bar or none, -v or not
    assert tty_out.replace("/a/", "/b/") == quiet.stdout == loud.stdout.replace("/c/", "/b/")
