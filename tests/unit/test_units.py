import pytest

from orrery import units

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("53.8GB/s", "bandwidth", 53.8e9),
        ("200Gbps", "bandwidth", 25e9),
        ("25 GiB/s", "bandwidth", 25 * 2**30),
        ("80GiB", "size", 80 * 2**30),
        ("50MB", "size", 50e6),
        ("2.5us", "time", 2.5e-6),
        ("6.8ps", "time", 6.8e-12),
        ("1.5 ms", "time", 1.5e-3),
        (0.25, "time", 0.25),
        (4096, "size", 4096.0),
        ("1980MHz", "frequency", 1.98e9),
        ("1.41 GHz", "frequency", 1.41e9),
        ("2619000kHz", "frequency", 2.619e9),
    ],
)
def test_quantities_parse_to_si_units(text, kind, value):
    assert units.parse(text, kind) == value


@pytest.mark.parametrize(
    "text, kind, expected",
    [
        ("5GB", "bandwidth", "bandwidth such as"),
        ("1ms", "size", "size such as"),
        ("3 parsecs", "time", "time such as"),
        ("-1us", "time", "non-negative"),
        (True, "time", "time such as"),
        ("fast", "bandwidth", "bandwidth such as"),
        ("1980mHz", "frequency", "frequency such as"),  # millihertz: a slip for MHz
        ("0MHz", "frequency", "positive frequency"),
        ("2GB/s", "frequency", "frequency such as"),
    ],
)
def test_wrong_units_say_what_was_expected(text, kind, expected):
    with pytest.raises(ValueError, match=expected):
        units.parse(text, kind)
