"""The run description, the one border from Python to the shim: what Python writes is what the
shim's generated parser reads, field for field and bit for bit, and a bad value in it stops the
run with one line naming the file, the key, the value and what was expected."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from conftest import REPO

from orrery import machines as machine
from orrery.errors import SimulationError
from orrery.machines import platform
from orrery.run import launch, results, run_description
from orrery.run.costs import Costs, KernelCost

pytestmark = pytest.mark.native

ONE = "[{latency = '1us', bandwidth = '10GB/s', up_to = '64KiB'}, {latency = '3us', bandwidth = '20GB/s'}]"
EVERY_PART = (
    [f"copies.{d}={ONE}" for d in ("H2D", "D2H", "D2D", "peer")]
    + [
        f"{s}.{p}={ONE}"
        for s in ("messages", "gaps")
        for p in ("device_intra", "device_inter", "host_intra", "host_inter")
    ]
    + [
        "collectives.allreduce_device=[{extra = '2us', up_to = '1KiB'}, {extra = '0.5us', steps = 'linear', ranks = 6}]",
        "gpudirect.rdma=false",
        'mpi.intra_node="nic"',
    ]
)


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> Path:
    """A program that reads a run description with the generated parser and writes it back."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed")
    d = tmp_path_factory.mktemp("echo")
    installed = Path(str(resources.files("orrery") / "lib" / run_description.SCHEMA_FILE))  # what Python reads
    subprocess.run(
        [sys.executable, str(REPO / "interpose" / "core" / "gen_run_description.py"), str(installed), str(d)],
        check=True,
    )
    exe = d / "echo"
    subprocess.run(
        [
            "g++",
            "-std=c++17",
            "-I",
            str(d),
            "-I",
            str(REPO / "interpose"),
            str(REPO / "tests" / "native" / "run_description_echo.cpp"),
            str(d / "run_description.cpp"),
            str(d / "run_description_write.cpp"),
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


def read_back(echo: Path, tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    f = tmp_path / "run.json"
    f.write_text(text)
    return subprocess.run([str(echo), str(f)], capture_output=True, text=True, check=False)


def test_every_field_python_writes_is_read_by_the_shim_exactly(echo, tmp_path):
    m = machine.load("h100-ib200", machine.parse_overrides(EVERY_PART))
    layout = platform.Layout.for_machine(m, 2, 2, 3)
    d = run_description.describe(
        m,
        layout,
        report=tmp_path / "report.tsv",
        options={"strict": True, "d2h_fill": "keep", "fold_threshold": 12345},
        kernels={"k(float*)": (1.25e-6, 3e-12)},
    )
    written = json.loads(run_description.to_json(d))
    # every optional part is there, so that each reader of the parser is exercised
    assert written["staging"]["links"] == ["n0-nic0-sw", "n0-nic1-sw", "n1-nic0-sw", "n1-nic1-sw"]
    assert written["gpus"][3]["message_end"] == "n1-gpu1-mpi"
    # a correction's extra on 6 ranks as one step's (of the 5 of a linear algorithm)
    assert written["mpi"]["collectives"]["allreduce_device"] == [
        {"up_to": 1024.0, "per_step_s": 2e-6, "steps": "constant"},
        {"up_to": None, "per_step_s": pytest.approx(0.1e-6, rel=1e-12), "steps": "linear"},
    ]
    assert written["copies"]["peer"][0] == {"up_to": 65536.0, "latency_s": 1e-6, "bandwidth": 10e9}
    assert [(r["node"], r["cpu"]) for r in written["ranks"]] == [
        (0, "n0-cpu0"),
        (0, "n0-cpu1"),
        (0, "n0-cpu2"),
        (1, "n1-cpu0"),
        (1, "n1-cpu1"),
        (1, "n1-cpu2"),
    ]
    p = read_back(echo, tmp_path, run_description.to_json(d))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == written


def test_the_shims_defaults_are_the_pythons(echo, tmp_path):
    m = machine.load("h100-ib200")
    full = json.loads(
        run_description.to_json(
            run_description.describe(
                m, platform.Layout.for_machine(m, 1), report=tmp_path / "r", options={}, kernels={}
            )
        )
    )
    fields = run_description.SCHEMA["types"][run_description.SCHEMA["root"]]["fields"]
    defaulted = [k for k, spec in fields.items() if "default" in spec]
    assert {"default_kernel_s", "fold_threshold", "fold_blocksize", "d2h_fill", "strict"} <= set(defaulted)
    bare = {k: v for k, v in full.items() if k not in defaulted}
    p = read_back(echo, tmp_path, json.dumps(bare))
    assert p.returncode == 0, p.stderr
    back = json.loads(p.stdout)
    assert {k: back[k] for k in defaulted} == {k: full[k] for k in defaulted}
    assert back["default_kernel_s"] == 5e-6 and back["fold_threshold"] == 1 << 20 and back["fold_blocksize"] == 1 << 26
    assert back["fold_device_blocksize"] == 1 << 39


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d["gpus"][1].update(node="1"), "key 'gpus[1].node' has value \"1\", expected an integer"),
        (lambda d: d["mpi"].pop("poll_time_s"), "key 'mpi.poll_time_s' is missing, expected a number"),
        (
            lambda d: d["gpu"].update(colour="red"),
            (
                "key 'gpu.colour' is not one of the schema's (name, memory_bytes, "
                "sm_count, cc_major, cc_minor, clock_khz, memory_clock_khz, l2_bytes, memory_bus_width, "
                "max_threads_per_sm, max_blocks_per_sm, shared_per_block, "
                "shared_per_block_optin, shared_per_sm, copy_engines, "
                "launch_overhead_s, copy_overhead_s, sync_overhead_s, "
                "memset_bandwidth, d2d_bandwidth, d2d_latency_s)"
            ),
        ),
        (
            lambda d: d.update(d2h_fill="random"),
            ("key 'd2h_fill' has value \"random\", expected one of 'large', 'zero', 'keep'"),
        ),
        (
            lambda d: d["copies"].update(H2D=[{"up_to": None, "latency_s": 0, "bandwidth": 0}]),
            "key 'copies.H2D[0].bandwidth' has value 0, expected a number > 0",
        ),
    ],
)
def test_a_bad_value_is_named_with_its_key(echo, tmp_path, change, message):
    m = machine.load("h100-ib200")
    d = json.loads(
        run_description.to_json(
            run_description.describe(
                m, platform.Layout.for_machine(m, 1, 2), report=tmp_path / "r", options={}, kernels={}
            )
        )
    )
    change(d)
    p = read_back(echo, tmp_path, json.dumps(d))
    assert (p.returncode, p.stderr) == (3, f"run description {tmp_path / 'run.json'}: {message}\n")


def test_a_bad_run_description_stops_the_real_shim_as_orrerys_error(programs, tmp_path, monkeypatch, h100):
    """Orrery wrote it, so a bad value is Orrery's bug: the run ends as orrery_error (exit 3), on
    one line, before the program runs."""
    real = run_description.to_json

    def corrupt(d):
        text = json.loads(real(d))
        text["gpu"]["sm_count"] = 132.5
        return json.dumps(text)

    monkeypatch.setattr(run_description, "to_json", corrupt)
    out = tmp_path / "o"
    opts = launch.RunOptions(
        machine=h100,
        layout=platform.Layout.for_machine(h100, 1, 1),
        out=out,
        program=[str(programs["device_query"])],
        costs=Costs({"k": KernelCost(1e-6, 0.0)}),
        capture_output=True,
    )
    with pytest.raises(SimulationError) as e:
        launch.run(opts)
    expected = f"run description {out / 'run.json'}: key 'gpu.sm_count' has value 132.5, expected an integer"
    assert str(e.value) == expected
    res = json.loads((out / "results.json").read_text())
    assert (res["status"], res["run"]["exit_code"], res["failure"]["message"]) == ("orrery_error", 3, expected)


def test_the_report_the_shim_writes_back_has_the_schema_s_header(run_program, programs):
    """The other way across the border: the shim writes report.tsv under the header generated from
    the schema's report_columns, and results.py reads it by the same names."""
    schema = json.loads((REPO / "interpose" / "core" / "run_description.json").read_text())
    assert tuple(schema["report_columns"]) == results.REPORT_COLUMNS
    r = run_program(programs["device_query"], options=("--gpus-per-node", "1"))
    assert r.returncode == 0, r.stderr
    rows = (r.out / "report.tsv").read_text().splitlines()
    assert rows[0].split("\t") == schema["report_columns"]
    assert all(len(row.split("\t")) == len(schema["report_columns"]) for row in rows[1:])
