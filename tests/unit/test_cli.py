"""The `orrery machine` commands and `orrery calibrate`'s argument and input checks, through the
installed entry point."""

import subprocess
import sys
from pathlib import Path

import pytest

from orrery import machines as machine

pytestmark = pytest.mark.unit
ORRERY = str(Path(sys.executable).parent / "orrery")


def orrery(*args):
    return subprocess.run([ORRERY, *args], capture_output=True, text=True)


def test_machine_list_names_every_builtin():
    out = orrery("machine", "list").stdout
    for name in ("h100-ib200", "dgx-h100", "h100-pcie", "gh200-slingshot", "dgx-a100"):
        assert name in out


def test_machine_show_gives_si_values_and_sources():
    p = orrery("machine", "show", "h100-ib200", "--set", "nic.bandwidth=400Gbps")
    assert p.returncode == 0
    line = next(line for line in p.stdout.splitlines() if "nic.bandwidth" in line)
    assert "50000000000.0" in line and "InfiniBand NDR200" in line


def test_machine_show_lists_a_measured_model_segment_by_segment():
    p = orrery(
        "machine",
        "show",
        "h100-ib200",
        "--set",
        "copies.D2H=[{up_to = '2MB', latency = '2us', bandwidth = '45GB/s'}, {latency = 0, bandwidth = '20GB/s'}]",
    )
    assert p.returncode == 0, p.stderr
    assert "up to 2e+06 B: latency 2e-06, bandwidth 45000000000.0" in p.stdout
    assert "larger: latency 0.0, bandwidth 20000000000.0" in p.stdout


def test_machine_validate_accepts_a_good_file_and_names_the_bad_key(tmp_path):
    from importlib import resources

    text = resources.files("orrery.machines.builtin").joinpath("dgx-a100.toml").read_text()
    good = tmp_path / "mine.toml"
    good.write_text(text.replace('name = "dgx-a100"', 'name = "mine"'))
    p = orrery("machine", "validate", str(good))
    count = len(machine.load("dgx-a100").parameters())  # each key the file sets
    assert (p.returncode, p.stdout.strip().endswith(f"valid machine 'mine' ({count} parameters)")) == (0, True)
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('latency = "0.6us"', 'latency = "0.6 lightyears"'))
    p = orrery("machine", "validate", str(bad))
    assert p.returncode == 2
    assert f"{bad}: key 'nic.latency': got '0.6 lightyears', expected a time" in p.stderr


def test_machine_export_writes_the_platform(tmp_path):
    p = orrery("machine", "export", "dgx-h100", "--format", "xml", "--nodes", "2")
    assert p.returncode == 0
    assert p.stdout.startswith("<?xml") and 'id="n1-gpu7"' in p.stdout and 'id="rail7-0"' in p.stdout


@pytest.mark.parametrize("layout", ["2", "2x", "x4", "0x4", "2x4.5", "two by four"])
def test_calibrate_collective_layout_must_be_nodes_x_gpus(tmp_path, layout):
    p = orrery(
        "calibrate",
        "--machine",
        "h100-ib200",
        "--input",
        str(tmp_path / "none.txt"),
        "--collective-layout",
        layout,
        "--out",
        str(tmp_path / "o"),
    )
    assert p.returncode == 2
    assert f"--collective-layout: got '{layout}', expected NODESxGPUS, two positive whole numbers" in p.stderr
    assert not (tmp_path / "o").exists()  # nothing half-written


def test_calibrate_refuses_a_sweep_with_too_few_sizes_for_a_fit(tmp_path):
    """Two sizes of osu_bw cannot place a latency and a bandwidth: an error naming the file and
    the series' last line, and nothing written (nvbandwidth's one size per testcase is compared
    instead: tests/integration/test_calibrate_closed_loop.py)."""
    f = tmp_path / "osu_bw.txt"
    f.write_text("# OSU MPI-CUDA Bandwidth Test v7.4\n# Size      Bandwidth (MB/s)\n1     0.89\n2     1.82\n")
    p = orrery(
        "calibrate",
        "--machine",
        "h100-ib200",
        "--input",
        str(f),
        "--p2p-path",
        "inter-node",
        "--out",
        str(tmp_path / "o"),
    )
    assert p.returncode == 2
    assert (
        f"{f}:4: key 'size': got '2 size(s) of OSU MPI-CUDA Bandwidth Test v7.4 (bandwidth)', expected at "
        "least 3 sizes for a fit (latency + size / bandwidth)"
    ) in p.stderr
    assert not (tmp_path / "o").exists()


def test_calibrate_with_nothing_to_fit_or_compare_is_an_error(tmp_path):
    """BabelStream loads, but nothing in calibration/bench reproduces it: no calibration
    written that fitted nothing, and the reason is given."""
    from test_measurements import BABEL

    f = tmp_path / "babelstream.txt"
    f.write_text(BABEL)
    p = orrery("calibrate", "--machine", "h100-ib200", "--input", str(f), "--out", str(tmp_path / "o"))
    assert p.returncode == 2
    assert f"orrery: error: {f}: got \"BabelStream Copy ({f}): a streaming kernel's memory bandwidth" in p.stderr
    assert 'more not fitted)", expected a sweep calibration/bench can reproduce' in p.stderr
    assert "nothing to fit or compare" in p.stderr
    assert not (tmp_path / "o").exists()


def test_the_compiler_wrappers_start_without_the_rest_of_the_command_line():
    # the entry point, as the installed script calls it, with the wrapper's work replaced by a
    # list of what was imported by then: no machine models (pydantic), no run, no command line
    code = (
        "import sys\n"
        "from orrery import _entry\n"
        "from orrery.run import build\n"
        "build.wrapper_main = lambda name, args: print(name, args, sorted(m for m in sys.modules if m.startswith("
        "('pydantic', 'orrery.machines', 'orrery.cli', 'orrery.run.launch', 'orrery.report')))) or 0\n"
        "sys.argv = ['orrery', 'mpicc', '-c', 'x.c']\n"
        "sys.exit(_entry.main())\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "mpicc ['-c', 'x.c'] []\n"


def test_the_installed_command_is_the_entry_point():
    script = Path(ORRERY).read_text()
    assert "from orrery._entry import main" in script
