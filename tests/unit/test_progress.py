"""Progress and log messages of the long commands (orrery/progress.py), on `orrery validate` with
its simulations replaced by a stand-in (each simulated figure 10 % above the measured one):
a bar on stderr only when stderr is a terminal, `-v` for what each step did, stdout unchanged."""

from __future__ import annotations

import sys

import pytest

from orrery import cli
from orrery.calibration import sweeps, validate

pytestmark = pytest.mark.unit


@pytest.fixture
def ten_percent_over(monkeypatch):
    """Simulations that give 1.1 x each measured value, and no benchmarks to build."""

    def simulate(repo, m, sweep, sizes, out):
        measured = dict(sweeps.measured_points(sweep, repo))
        return {s: 1.1 * measured[s] for s in sizes}

    monkeypatch.setattr(validate, "simulate", simulate)
    monkeypatch.setattr(validate, "build_bench", lambda repo=None: None)


def run_validate(capsys, monkeypatch, tmp_path, name: str, *, terminal: bool, verbose: bool) -> tuple[str, str]:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)  # capsys's stderr, for this call
    args = ["validate", "--machine", "h100-ib200", "--out", str(tmp_path / name)]
    assert cli.main(args + (["-v"] if verbose else [])) == 0
    out, err = capsys.readouterr()
    return out.replace(str(tmp_path / name), "OUT"), err


def test_validate_shows_a_bar_on_a_terminal_only_and_logs_each_sweep_with_verbose(
    ten_percent_over, capsys, monkeypatch, tmp_path
):
    quiet_out, quiet_err = run_validate(capsys, monkeypatch, tmp_path, "a", terminal=False, verbose=False)
    assert quiet_err == ""  # not a terminal: no bar, and only warnings (there are none)
    tty_out, tty_err = run_validate(capsys, monkeypatch, tmp_path, "b", terminal=True, verbose=False)
    names = [s.name for s in sweeps.sweeps_for("h100-ib200")]
    assert len(names) == 3
    # tqdm's bar over the three sweeps (redrawn at most every 0.1 s, cleared at the end: how
    # far it gets before that depends on the time the stand-in takes), no messages without -v
    assert "\rvalidate:   0%|" in tty_err and "| 0/3 [" in tty_err
    assert "orrery:" not in tty_err
    loud_out, loud_err = run_validate(capsys, monkeypatch, tmp_path, "c", terminal=False, verbose=True)
    # one line per sweep: its sizes, and |error| 10 % everywhere
    sizes = [len(sweeps.measured_points(s)) for s in sweeps.sweeps_for("h100-ib200")]
    assert loud_err.splitlines() == [
        f"orrery: {name}: {n} sizes simulated, |error| median 10.0%, p95 10.0%, max 10.0%"
        for name, n in zip(names, sizes)
    ]
    assert "median 10.0%" in quiet_out  # stdout: the comparison, as before
    assert quiet_out == tty_out == loud_out
