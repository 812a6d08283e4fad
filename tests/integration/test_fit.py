"""`orrery fit`: a program's cost parameters fitted to measured run times, simulator in the loop."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import tomllib

import numpy as np
import pytest
from conftest import ORRERY, REPO, nvcc_available, orrery

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed"),
]


def jacobi_time(stdout: str) -> float:
    """The Jacobi example's own timing line ("time: T s ..."), in seconds."""
    return float(next(ln for ln in stdout.splitlines() if ln.startswith("time:")).split()[1])


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
    # the committed cost file holds these values (same inputs, same fit), to 1e-9: not to the last
    # digit, which the optimizer's path through last-digit differences of its inputs can move (on
    # 2026-12-07 this machine gave an alpha 4e-22 s off the committed one, with scipy 1.16.3 to
    # 1.17.1 alike; a change of the simulation that matters moves it by far more)
    committed = tomllib.loads((REPO / "examples" / "jacobi" / "costs.toml").read_text())["kernels"]["jacobi_kernel"]
    assert sorted(result["parameters"]) == sorted(k for k in committed if k in ("alpha", "beta"))
    for name, value in result["parameters"].items():
        assert value == pytest.approx(committed[name], rel=1e-9, abs=0), name
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
        figures.append(jacobi_time(r.stdout) / 10)
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
        (
            lambda s: s + '\n[parameters."mpi.send_overhead_devic"]\ninitial = "1us"\n',
            r"key 'parameters.mpi.send_overhead_devic.set': got 'mpi.send_overhead_devic', expected a machine "
            r"parameter \(did you mean 'mpi.send_overhead_device'\?\)",
        ),
    ],
)
def test_bad_specs_name_file_key_and_value(example, tmp_path, edit, message):
    bad = example / "bad.toml"
    bad.write_text(edit((example / "fit.toml").read_text()))
    p = orrery("fit", str(bad), "--out", str(tmp_path / "o"))
    assert p.returncode == 2, p.stdout
    assert len(p.stderr.splitlines()) == 1, p.stderr  # one line, no traceback
    assert "bad.toml" in p.stderr
    assert re.search(message, p.stderr), p.stderr


# The closed loop of machine parameters: "measured" figures simulated with known values of a cost
# parameter (the Jacobi kernel's beta) and two machine ones (the per-message software time of a
# CUDA-aware send within a node and between nodes), at three layouts: 1, 2 and 2 GPUs.
MADE = {"beta": 1e-11, "mpi.send_overhead_device_intra": 3e-6, "inter": 5e-6}
LAYOUTS = [(1, 1, 1024), (1, 2, 256), (2, 1, 256)]  # nodes, GPUs per node, grid
NITER = 10
# The figure per iteration, as each parameter moves it (s per unit), by hand: a jacobi_kernel launch
# per iteration of ceil(nx/32)*32 x ceil(rows/32)*32 threads (rows: ny - 2 split among the ranks),
# and two MPI_Sendrecv of device rows per iteration, each a send that pays the overhead on the path
# (one GPU: to itself, within its node). Rows: 1022 (one rank), 127 (each of two).
SENSITIVITY = np.array(
    [
        [1024 * 1024, 2, 0],  # 1 x 1, 1024 x 1024
        [256 * 128, 2, 0],  # 1 x 2, 256 x 256: within a node
        [256 * 128, 0, 2],  # 2 x 1, 256 x 256: between nodes
    ]
)
QUANTUM = 1e-9 / NITER  # the program prints its time to 1 ns; the figure is per iteration
XTOL = 1e-8  # appfit's least_squares xtol, on values scaled to their initial ones

MACHINE_FIT = """
program = "{program}"
machine = "h100-ib200"
figure = '^time:\\s+(\\S+) s'
costs = '''
[kernels.jacobi_kernel]
alpha = "8us"
beta = {{beta}}
[kernels.initialize_boundaries]
time = "5us"
'''
[parameters.beta]
initial = 2e-11
min = 0.0

[parameters."mpi.send_overhead_device_intra"]
initial = "1us"

[parameters.inter]
set = ["mpi.send_overhead_device"]
initial = "2us"
"""


def jacobi_args(example, nx: int) -> list[str]:
    return [str(example / "jacobi"), "-nx", str(nx), "-ny", str(nx), "-niter", str(NITER)]


@pytest.fixture(scope="module")
def machine_fit(example, tmp_path_factory):
    """The figures simulated with MADE, and `orrery fit` from other values on them."""
    d = tmp_path_factory.mktemp("machine-fit")
    (d / "made.toml").write_text(
        f'[kernels.jacobi_kernel]\nalpha = "8us"\nbeta = {MADE["beta"]!r}\n[kernels.initialize_boundaries]\ntime = "5us"\n'
    )
    machine = [
        f"--set=mpi.send_overhead_device_intra={MADE['mpi.send_overhead_device_intra']!r}s",
        f"--set=mpi.send_overhead_device={MADE['inter']!r}s",
    ]
    made = [  # at once: each a simulation in a process of its own
        subprocess.Popen(
            [
                ORRERY,
                "run",
                f"--nodes={n}",
                f"--gpus-per-node={g}",
                f"--costs={d / 'made.toml'}",
                *machine,
                f"--out={d / f'made-{i}'}",
                "--",
                *jacobi_args(example, nx),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i, (n, g, nx) in enumerate(LAYOUTS)
    ]
    figures = [jacobi_time(p.communicate()[0]) / NITER for p in made]
    assert all(p.returncode == 0 for p in made)
    runs = "".join(
        f'\n[[runs]]\nnodes = {n}\ngpus_per_node = {g}\nargs = ["-nx", "{nx}", "-ny", "{nx}", "-niter", "{NITER}"]'
        f"\nper = {NITER}\nmeasured = {t!r}\n"
        for (n, g, nx), t in zip(LAYOUTS, figures)
    )
    (d / "fit.toml").write_text(MACHINE_FIT.format(program=example / "jacobi") + runs)
    p = orrery("fit", str(d / "fit.toml"), "--out", str(d / "fit"))
    assert p.returncode == 0, p.stderr
    return d, figures, p


def test_machine_values_a_simulation_was_made_with_are_recovered_beside_a_cost_parameter(machine_fit):
    d, figures, p = machine_fit
    result = json.loads((d / "fit" / "fit.json").read_text())
    assert [tuple(r["layout"].values()) for r in result["runs"]] == [(n, g, g) for n, g, _ in LAYOUTS]
    assert result["machine_parameters"] == {
        "mpi.send_overhead_device_intra": result["parameters"]["mpi.send_overhead_device_intra"],
        "mpi.send_overhead_device": result["parameters"]["inter"],
    }
    # the fit reproduces the made figures: within a printed quantum
    residuals = np.array([r["simulated"] - r["measured"] for r in result["runs"]])
    assert [r["measured"] for r in result["runs"]] == figures
    assert np.all(np.abs(residuals) <= QUANTUM), residuals
    # each value as close as the figures resolve it: a figure moves by SENSITIVITY per unit, so
    # the fitted values are off by at most |S^-1| (|residual| + a quantum: both figures rounded),
    # plus the optimiser's own step tolerance
    names = list(MADE)
    made, fitted = np.array([MADE[n] for n in names]), np.array([result["parameters"][n] for n in names])
    bound = np.abs(np.linalg.inv(SENSITIVITY)) @ (np.abs(residuals) + QUANTUM) + XTOL * made
    assert np.all(np.abs(fitted - made) <= bound), (fitted - made, bound)
    assert np.all(bound < 1e-4 * made)  # (a bound that says something)
    assert "mpi.send_overhead_device = " in p.stdout and " 2x1 " in p.stdout


def test_the_fit_writes_a_calibration_file_that_runs_the_fitted_machine_in_orrery_run(example, machine_fit):
    d, _, _ = machine_fit
    result = json.loads((d / "fit" / "fit.json").read_text())
    cal = json.loads((d / "fit" / "calibration.json").read_text())
    assert cal["machine"] == "h100-ib200" and cal["command"] == f"orrery fit {d / 'fit.toml'}"
    # the fitted keys, and the machine's own measured models (a calibration replaces a description's)
    fitted = result["machine_parameters"]
    assert {k: cal["overrides"][k] for k in fitted} == fitted
    assert all(
        k.split(".")[0] in ("copies", "messages", "gaps", "collectives") for k in set(cal["overrides"]) - set(fitted)
    )
    nodes, gpus, nx = LAYOUTS[2]
    r = orrery(
        "run",
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        str(gpus),
        "--calibration",
        str(d / "fit" / "calibration.json"),
        "--costs",
        str(d / "fit" / "costs.toml"),
        "--out",
        str(d / "again"),
        "--",
        *jacobi_args(example, nx),
    )
    assert r.returncode == 0, r.stderr
    # the same machine and costs as the fit's own last run of this layout: the same figure, bit for bit
    assert jacobi_time(r.stdout) / NITER == result["runs"][2]["simulated"]


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
