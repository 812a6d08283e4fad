import json
import re

import pytest

from orrery.errors import InputError
from orrery.run import costs

pytestmark = pytest.mark.unit


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_toml_cost_file(tmp_path):
    p = write(
        tmp_path,
        "c.toml",
        '[default]\ntime = "7us"\n[kernels.jacobi]\nalpha = "17us"\nbeta = "6.8ps"\n'
        '[kernels."void f<int>(int*)"]\ntime = 0.001\n',
    )
    c = costs.load(p)
    assert c.default_s == 7e-6
    assert c.kernels["jacobi"].seconds(1000) == pytest.approx(17e-6 + 6.8e-9, rel=1e-12)
    assert c.kernels["void f<int>(int*)"] == costs.KernelCost(0.001, 0.0)


def test_json_cost_file_and_default(tmp_path):
    p = write(tmp_path, "c.json", json.dumps({"kernels": {"k": {"beta": "1ns"}}}))
    c = costs.load(p)
    assert c.kernels["k"] == costs.KernelCost(0.0, 1e-9)
    assert c.default_s == costs.DEFAULT_KERNEL_TIME == 5e-6


@pytest.mark.parametrize(
    "text, match",
    [
        ('[kernels.k]\ntime = "1us"\nalpha = "1us"\n', r"kernels.k': .*either 'time' or 'alpha'/'beta'"),
        ("[kernels.k]\n", r"kernels.k': .*give 'time', or 'alpha'"),
        ('[kernels.k]\ntime = "12 parsecs"\n', r"kernels.k.time': got '12 parsecs', expected a time"),
        ("[kernels.k]\nspeed = 3\n", r"kernels.k.speed': got 3, expected no such key"),
        ("[kernel.k]\ntime = 1\n", r"key 'kernel'"),
        ("[kernels.k\n", "valid TOML"),
    ],
)
def test_malformed_cost_files(tmp_path, text, match):
    p = write(tmp_path, "c.toml", text)
    with pytest.raises(InputError, match=match) as e:
        costs.load(p)
    assert str(p) in str(e.value)


def test_cost_file_must_be_toml_or_json(tmp_path):
    with pytest.raises(InputError, match=re.escape("a .toml or .json cost file")):
        costs.load(write(tmp_path, "c.yaml", "x: 1"))
    with pytest.raises(InputError, match="an existing cost file"):
        costs.load(tmp_path / "missing.toml")
