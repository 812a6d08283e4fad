"""`orrery fit` specs with machine parameters: read, checked, and the fitted machine written as a
calibration file (no simulation: the fit itself is tests/integration/test_fit.py's)."""

from __future__ import annotations

import json
import re

import pytest

from orrery import machines
from orrery.calibration import appfit, merge
from orrery.errors import InputError

pytestmark = pytest.mark.unit

SPEC = """
program = "app"
machine = "{machine}"
options = {options}
gpus_per_node = 2
figure = '^time: (\\S+)'
costs = '''
[kernels.k]
alpha = {{alpha}}
'''
[parameters.alpha]
initial = "10us"
min = "0s"

[parameters."mpi.send_overhead_device_intra"]
initial = "1.5us"
max = "0.1ms"

[parameters.inter]
set = ["mpi.send_overhead_device", "mpi.recv_overhead_device"]
initial = "2us"
min = "0.5us"

[[runs]]
args = ["-n", "1"]
measured = "1ms"

[[runs]]
args = ["-n", "2"]
nodes = 2
gpus_per_node = 4
measured = "2ms"
"""


def spec(tmp_path, machine="h100-ib200", options="[]", edit=lambda s: s):
    p = tmp_path / "fit.toml"
    p.write_text(edit(SPEC.format(machine=machine, options=options)))
    return p


def test_machine_parameters_are_read_in_si_units_with_their_keys_and_each_run_has_its_layout(tmp_path):
    problem = appfit.load(spec(tmp_path))
    params = problem.spec.parameters
    # a dotted name sets its own key; `set` names the keys; min is 0 unless given
    assert params["mpi.send_overhead_device_intra"].set == ["mpi.send_overhead_device_intra"]
    assert params["mpi.send_overhead_device_intra"].values() == (1.5e-6, 0.0, pytest.approx(1e-4, rel=1e-12))
    assert params["inter"].values() == (2e-6, 0.5e-6, float("inf"))
    assert params["alpha"].set == [] and params["alpha"].values() == (1e-5, 0.0, float("inf"))
    assert problem.spec.cost_names() == ["alpha"]
    assert problem.spec.machine_names() == ["inter", "mpi.send_overhead_device_intra"]
    # the spec's layout, and the run's own
    assert [(lay.nodes, lay.gpus_per_node, lay.ranks_per_node) for lay in problem.layouts] == [(1, 2, 2), (2, 4, 4)]
    values = {"alpha": 3e-5, "mpi.send_overhead_device_intra": 3e-6, "inter": 5e-6}
    assert appfit.machine_overrides(problem, values) == {
        "mpi.send_overhead_device_intra": 3e-6,
        "mpi.send_overhead_device": 5e-6,
        "mpi.recv_overhead_device": 5e-6,
    }
    m = appfit.machine_at(problem, values)
    assert (m.mpi.send_overhead_device_intra, m.mpi.send_overhead_device, m.mpi.recv_overhead_device) == (
        3e-6,
        5e-6,
        5e-6,
    )
    assert appfit.cost_text(problem, values) == "[kernels.k]\nalpha = 3e-05\n"


@pytest.mark.parametrize(
    "edit, key, message",
    [
        (
            lambda s: s.replace('set = ["mpi.send_overhead_device",', 'set = ["mpi.send_overhead_devices",'),
            "parameters.inter.set",
            r"'mpi.send_overhead_devices', expected a machine parameter \(did you mean 'mpi.send_overhead_device'\?\)",
        ),
        (
            lambda s: s.replace('[parameters."mpi.send_overhead_device_intra"]', '[parameters."mpi.sendoverhead"]'),
            "parameters.mpi.sendoverhead.set",
            r"'mpi.sendoverhead', expected a machine parameter",
        ),
        (
            lambda s: s.replace('set = ["mpi.send_overhead_device", ', 'set = ["node.gpus", '),
            "parameters.inter.set",
            r"'node.gpus', expected a machine parameter that is a quantity with a unit",
        ),
        (
            lambda s: s.replace('"mpi.recv_overhead_device"]', '"mpi.eager_threshold_device"]'),
            "parameters.inter.set",
            r"machine keys of one kind of quantity \(these are \['size', 'time'\]\)",
        ),
        (
            lambda s: s.replace('initial = "1.5us"', 'initial = "1.5GB/s"'),
            "parameters.mpi.send_overhead_device_intra.initial",
            r"'1.5GB/s', expected a time with its unit",
        ),
        (  # a machine's value needs its unit, as in a description and --set
            lambda s: s.replace('initial = "1.5us"', "initial = 1.5e-6"),
            "parameters.mpi.send_overhead_device_intra.initial",
            r"1.5e-06, expected a time with its unit",
        ),
        (
            lambda s: s.replace('initial = "1.5us"', 'initial = "0us"'),
            "parameters.mpi.send_overhead_device_intra.initial",
            r"'0us', expected a value other than 0",
        ),
        (
            lambda s: s.replace('initial = "2us"\nmin = "0.5us"', 'initial = "2us"\nmin = "-1us"'),
            "parameters.inter.min",
            r"'-1us', expected a non-negative time",
        ),
        (  # a bound the machine refuses (poll_time is above 0)
            lambda s: s.replace(
                'set = ["mpi.send_overhead_device", "mpi.recv_overhead_device"]', 'set = ["mpi.poll_time"]'
            ).replace('min = "0.5us"', 'min = "0us"'),
            "parameters.inter.min",
            r"'0.0s', expected a value the machine takes for mpi.poll_time \(greater than 0\)",
        ),
        (
            lambda s: s.replace('set = ["mpi.send_overhead_device",', 'set = ["mpi.send_overhead_device_intra",'),
            "parameters.mpi.send_overhead_device_intra.set",
            r"expected a key no other parameter sets \(inter does\)",
        ),
        (
            lambda s: s.replace("alpha = {alpha}", "alpha = {alpha}\nbeta = {inter}"),
            "costs",
            r"expected exactly the fitted parameters \['alpha'\] as \{name\} \(not the machine parameters",
        ),
        (
            lambda s: s[: s.index("costs")] + s[s.index("[parameters.alpha]") :],
            "costs",
            r"None, expected a cost file with the cost parameters \['alpha'\]",
        ),
        (
            lambda s: s.replace("nodes = 2\ngpus_per_node = 4", "nodes = 2\ngpus_per_node = 9"),
            "runs[1].gpus_per_node",
            r"9, expected between 1 and 4 \(GPUs per node of h100-ib200\)",
        ),
        (
            lambda s: s.replace("nodes = 2\ngpus_per_node = 4", "nodes = 0"),
            "runs.1.nodes",
            r"0, expected greater than or equal to 1",
        ),
    ],
)
def test_bad_machine_parameters_name_the_spec_key_and_value(tmp_path, edit, key, message):
    with pytest.raises(InputError) as e:
        appfit.load(spec(tmp_path, edit=edit))
    line = str(e.value)
    assert "\n" not in line  # one problem, one line
    assert line.startswith(f"{tmp_path / 'fit.toml'}: key '{key}': got "), line
    assert re.search(message, line), line


def test_a_key_the_options_set_too_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"key 'parameters.inter.set': got 'mpi.recv_overhead_device', expected a key"):
        appfit.load(spec(tmp_path, options='["mpi.recv_overhead_device=1us"]'))


def test_the_calibration_file_gives_the_machine_the_fit_ran_measured_models_and_options_included(tmp_path):
    """Under a calibration a description's measured models are left out (merge.machine): the
    file carries the spec machine's own, so that `orrery run --calibration` runs the fitted one."""
    problem = appfit.load(spec(tmp_path, machine="gh200-slingshot", options='["pcie.bandwidth=40GB/s"]'))
    assert problem.machine.messages.device_intra  # the description's measured models, to carry over
    values = {"alpha": 3e-5, "mpi.send_overhead_device_intra": 3e-6, "inter": 5e-6}
    result = {
        "parameters": values,
        "machine_parameters": appfit.machine_overrides(problem, values),
        "inputs": [],
        "runs": [],
        "max_abs_relative_error": 0.0,
        "simulations": 0,
    }
    cal = appfit.calibration(problem, result)
    assert cal is not None
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(cal))
    read = merge.read(path, "gh200-slingshot")
    assert read.overrides["pcie.bandwidth"] == 40e9 and read.overrides["mpi.send_overhead_device"] == 5e-6
    calibrated = merge.machine("gh200-slingshot", read)
    fitted = appfit.machine_at(problem, values)
    assert calibrated == fitted
    assert calibrated != machines.load("gh200-slingshot")  # (the fit's values are not the built-in's)
    # without machine parameters there is no calibration file
    assert appfit.calibration(problem, {**result, "machine_parameters": {}}) is None
