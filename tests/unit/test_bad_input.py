"""A corpus of bad input, every kind Orrery reads, each through the real `orrery` command.

Each case writes its malformed files in tmp_path and expects exit status 2 and exactly
the stated error on stderr: one line naming the file (or flag), the key and the value
(a file with several problems: a summary line, then one line per problem), no
traceback, within a timeout (two of these never returned). The `orrery run` cases start
from a folder holding a real earlier run's output: a refused run must leave nothing of
it there looking current. No case reaches smpirun (the one earlier run does), so the
corpus is fast; the `orrery run` cases need nvcc for that earlier run's program.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import pytest
from conftest import ORRERY, REPO, nvcc_available

pytestmark = pytest.mark.unit

TIMEOUT = 60  # seconds; a case that takes longer hangs
# what `orrery run` writes in --out (orrery/run.py)
RUN_OUTPUTS = ("results.json", "report.tsv", "error.txt", "platform.json", "hostfile", "run.json", "machine.json")
UNIT = {
    "bandwidth": "a bandwidth with its unit, such as 53.8GB/s, 200Gbps or 2.5e10B/s",
    "time": "a time with its unit, such as 2.5us, 1ms or 0.5s",
}
BUILT_IN = "built-in machine h100-ib200"


def machine(*changes: tuple[str, str]) -> str:
    """h100-ib200's description with lines replaced (each `old` is a whole, unique line)."""
    text = resources.files("orrery.machines.builtin").joinpath("h100-ib200.toml").read_text()
    for old, new in changes:
        assert text.count(f"\n{old}\n") == 1, old
        text = text.replace(f"\n{old}\n", f"\n{new}\n")
    return text


def calibration(overrides: object = None, **fields) -> str:
    data = {"orrery_calibration": 3, "machine": "h100-ib200", **fields}
    if overrides is not None:
        data["overrides"] = overrides
    return json.dumps(data)  # a float nan as NaN, as Python's json reads it


@dataclass
class Case:
    """`args(d)`: the command after `orrery`, d the folder of the case's files; `error`: the
    stderr lines ({d}: that folder), a line ending in "..." matched as a prefix."""

    id: str
    args: Callable[[str], list[str]]
    error: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)


def run_case(id: str, run_args: list[str], error: list[str], files: dict | None = None) -> Case:
    """An `orrery run` case: {out} and {program} in run_args stand for the earlier run's
    folder and a program built with Orrery's wrappers."""
    return Case(
        id, lambda d: ["run", *(a.format(d=d, out="{out}", program="{program}") for a in run_args)], error, files or {}
    )


M = "{d}/m.toml"
# (id, description text or bytes, the error lines): each runs through `orrery machine validate`
MACHINES = [
    (
        "binary",
        b"\xff\xfe\x00\x01name",
        [
            (
                f"{M}: got 'byte 0xff at offset 0', expected a machine description in UTF-8 "
                "text (this is binary or in another encoding)"
            )
        ],
    ),
    (
        "latin-1",
        machine(('name = "h100-ib200"', 'name = "h100-\xe9"')).encode("latin-1"),
        [f"{M}: got 'byte 0xe9 at offset ...', expected a machine description in UTF-8 text ..."],
    ),
    ("not-toml", "[node\n", [f"{M}: got 'invalid TOML', expected valid TOML (..."]),
    (
        "nan-bandwidth",
        machine(('bandwidth = "53.8GB/s"', "bandwidth = nan")),
        [f"{M}: key 'pcie.bandwidth': got nan, expected a finite bandwidth, such as 53.8GB/s, 200Gbps or 2.5e10B/s"],
    ),
    (
        "zero-bandwidth",
        machine(('bandwidth = "53.8GB/s"', 'bandwidth = "0GB/s"')),
        [
            (
                f"{M}: key 'pcie.bandwidth': got '0GB/s', expected a positive bandwidth, such as 53.8GB/s, 200Gbps or "
                "2.5e10B/s (a rate of 0 is none)"
            )
        ],
    ),
    (
        "overflowing-bandwidth",
        machine(('bandwidth = "53.8GB/s"', 'bandwidth = "1e308GB/s"')),
        [
            (
                f"{M}: key 'pcie.bandwidth': got '1e308GB/s', expected a finite bandwidth: 1e308GB/s is beyond a float's range "
                "(1.8e308 in SI units)"
            )
        ],
    ),
    (
        "unitless-bandwidth",
        machine(('bandwidth = "53.8GB/s"', "bandwidth = 53.8")),
        [f"{M}: key 'pcie.bandwidth': got 53.8, expected {UNIT['bandwidth']} (a plain number has no unit)"],
    ),
    (
        "unitless-bandwidth-string",
        machine(('bandwidth = "53.8GB/s"', 'bandwidth = "53.8"')),
        [f"{M}: key 'pcie.bandwidth': got '53.8', expected {UNIT['bandwidth']} (a plain number has no unit)"],
    ),
    (
        "wrong-unit",
        machine(('latency = "0.5us"', 'latency = "0.5GB"')),
        [f"{M}: key 'pcie.latency': got '0.5GB', expected {UNIT['time']}"],
    ),
    (
        "negative-latency",
        machine(('latency = "0.6us"', 'latency = "-0.6us"')),
        [f"{M}: key 'nic.latency': got '-0.6us', expected a non-negative time"],
    ),
    (
        "infinite-oversubscription",
        machine(("oversubscription = 1.0", "oversubscription = inf")),
        [f"{M}: key 'fabric.oversubscription': got inf, expected a finite number"],
    ),
    (
        "rdma-yes",
        machine(("rdma = true", 'rdma = "yes"')),
        [f"{M}: key 'gpudirect.rdma': got 'yes', expected a valid boolean"],
    ),
    (
        "empty-name",
        machine(('name = "h100-ib200"', 'name = ""')),
        [f"{M}: key 'name': got '', expected a name (not empty or blank)"],
    ),
    (
        "count-as-string",
        machine(("gpus = 4", 'gpus = "4"')),
        [f"{M}: key 'node.gpus': got '4', expected a valid integer"],
    ),
    (
        "gpus-beyond-the-limit",
        machine(("gpus = 4", "gpus = 99999999999999999999")),
        [f"{M}: key 'node.gpus': got 99999999999999999999, expected less than or equal to 256"],
    ),
    (
        "nan-in-a-measured-model",
        machine(("[sources]", ('[copies]\nH2D = [{latency = nan, bandwidth = "1GB/s"}]\n\n[sources]'))),
        [f"{M}: key 'copies.H2D.0.latency': got nan, expected a finite time, such as 2.5us, 1ms or 0.5s"],
    ),
    # a cross-field problem names its keys and values, not the whole machine
    (
        "more-nics-than-gpus",
        machine(("per_node = 4", "per_node = 16")),
        [f"{M}: key 'nic.per_node': got 16, expected at most node.gpus (4): a NIC per GPU"],
    ),
    # every problem at once; a misspelt key named with the key it leaves missing
    (
        "misspelt-key",
        machine(("gpus = 4", "gpus_per_nodee = 4")),
        [
            f"{M}: 2 errors",
            f"  {M}: key 'node.gpus': got None, expected this key to be present",
            f"  {M}: key 'node.gpus_per_nodee': got 4, expected no such key (did you mean 'node.gpus'?)",
        ],
    ),
    (
        "misspelt-and-wrong",
        machine(("rdma = true", 'rdma = "on"'), ('latency = "0.5us"', 'latncy = "0.5us"')),
        [
            f"{M}: 3 errors",
            f"  {M}: key 'pcie.latency': got None, expected this key to be present",
            f"  {M}: key 'pcie.latncy': got '0.5us', expected no such key (did you mean 'pcie.latency'?)",
            f"  {M}: key 'gpudirect.rdma': got 'on', expected a valid boolean",
        ],
    ),
    (
        "unknown-section",
        machine(("[gpudirect]", "[gpudirekt]")),
        [
            f"{M}: 2 errors",
            f"  {M}: key 'gpudirect': got None, expected this key to be present",
            (
                f"  {M}: key 'gpudirekt': got {{'rdma': True, 'staging_chunk': '512KiB'}}, expected no such key (did you mean "
                "'gpudirect'?)"
            ),
        ],
    ),
]

# the same refusals through `orrery run` (one of each kind: the reader is the same)
RUN_MACHINES = (
    "binary",
    "nan-bandwidth",
    "unitless-bandwidth",
    "misspelt-key",
    "more-nics-than-gpus",
    "gpus-beyond-the-limit",
)
MACHINE_CASES = (
    [
        Case(f"machine-validate-{id}", lambda d: ["machine", "validate", f"{d}/m.toml"], error, {"m.toml": text})
        for id, text, error in MACHINES
    ]
    + [
        run_case(
            f"run-machine-{id}",
            ["--machine", "{d}/m.toml", "--out", "{out}", "--", "{program}"],
            error,
            {"m.toml": text},
        )
        for id, text, error in MACHINES
        if id in RUN_MACHINES
    ]
    + [
        Case(
            "machine-validate-not-toml-suffix",
            lambda d: ["machine", "validate", f"{d}/m.txt"],
            ["--machine: got '{d}/m.txt', expected a built-in machine (...) or a .toml file"],
            {"m.txt": machine()},
        ),
        Case(
            "machine-export-nodes-beyond-the-limit",
            lambda d: ["machine", "export", "h100-ib200", "--nodes", "99999999999"],
            ["--nodes: got 99999999999, expected a number of nodes from 1 to 4096 (Orrery's limit)"],
        ),
        Case(
            "machine-show-set-nan",
            lambda d: ["machine", "show", "h100-ib200", "--set", "nic.latency=nan"],
            [
                (
                    f"--set nic.latency (on {BUILT_IN}): key 'nic.latency': got nan, expected a finite time, such as 2.5us, 1ms "
                    "or 0.5s"
                )
            ],
        ),
    ]
)


def set_case(id: str, override: str, error: str) -> Case:
    return run_case(f"run-set-{id}", ["--set", override, "--out", "{out}", "--", "{program}"], [error])


SET_CASES = [
    set_case(
        "nan",
        "pcie.bandwidth=nan",
        f"--set pcie.bandwidth (on {BUILT_IN}): key 'pcie.bandwidth': got nan, "
        "expected a finite bandwidth, such as 53.8GB/s, 200Gbps or 2.5e10B/s",
    ),
    set_case(
        "inf-oversubscription",
        "fabric.oversubscription=inf",
        f"--set fabric.oversubscription (on {BUILT_IN}): key 'fabric.oversubscription': got inf, expected a "
        "finite number",
    ),
    set_case(
        "unitless",
        "pcie.bandwidth=64e9",
        f"--set pcie.bandwidth (on {BUILT_IN}): key 'pcie.bandwidth': got 64000000000.0, expected "
        f"{UNIT['bandwidth']} (a plain number has no unit)",
    ),
    set_case(
        "zero-bandwidth",
        "nic.bandwidth=0",
        f"--set nic.bandwidth (on {BUILT_IN}): key 'nic.bandwidth': got 0, expected a positive bandwidth, such as "
        "53.8GB/s, 200Gbps or 2.5e10B/s (a rate of 0 is none)",
    ),
    set_case(
        "overflow",
        "pcie.bandwidth=1e308GB/s",
        f"--set pcie.bandwidth (on {BUILT_IN}): key 'pcie.bandwidth': got '1e308GB/s', expected a finite "
        "bandwidth: 1e308GB/s is beyond a float's range (1.8e308 in SI units)",
    ),
    set_case(
        "gpus-beyond-the-limit",
        "node.gpus=99999999999999999999",
        f"--set node.gpus (on {BUILT_IN}): key 'node.gpus': got 99999999999999999999, expected less than or equal "
        "to 256",
    ),
    set_case(
        "rdma-yes",
        "gpudirect.rdma=yes",
        f"--set gpudirect.rdma (on {BUILT_IN}): key 'gpudirect.rdma': got 'yes', expected a valid boolean",
    ),
    set_case(
        "negative-latency",
        "pcie.latency=-1us",
        f"--set pcie.latency (on {BUILT_IN}): key 'pcie.latency': got '-1us', expected a non-negative time",
    ),
    set_case(
        "misspelt-key",
        "pcie.bandwith=64GB/s",
        "--set: key 'pcie.bandwith': got '64GB/s', expected a parameter "
        "of the machine (did you mean 'pcie.bandwidth'?)",
    ),
    set_case(
        "no-value", "pcie.bandwidth", "--set: got 'pcie.bandwidth', expected KEY=VALUE, e.g. pcie.bandwidth=64GB/s"
    ),
]


def costs_case(id: str, name: str, text: str | bytes, error: str) -> Case:
    return run_case(
        f"run-costs-{id}", ["--costs", f"{{d}}/{name}", "--out", "{out}", "--", "{program}"], [error], {name: text}
    )


C = "{d}/c"
COSTS_CASES = [
    costs_case(
        "binary-json",
        "c.json",
        b"\x89PNG\r\n\x1a\n",
        f"{C}.json: got 'byte 0x89 at offset 0', expected a cost file in UTF-8 text (this is binary or in "
        "another encoding)",
    ),
    costs_case(
        "binary-toml",
        "c.toml",
        b"\xfe\xff\x00k",
        f"{C}.toml: got 'byte 0xfe at offset 0', expected a cost file in UTF-8 text (this is binary or in "
        "another encoding)",
    ),
    costs_case(
        "json-nan",
        "c.json",
        '{"kernels": {"k": {"time": NaN}}}',
        f"{C}.json: key 'kernels.k.time': got nan, expected a finite time, such as 2.5us, 1ms or 0.5s",
    ),
    costs_case(
        "json-infinity",
        "c.json",
        '{"default": {"time": Infinity}}',
        f"{C}.json: key 'default.time': got inf, expected a finite time, such as 2.5us, 1ms or 0.5s",
    ),
    costs_case(
        "json-list",
        "c.json",
        "[1, 2]",
        f"{C}.json: got 'a JSON list', expected a cost file: a JSON object with default and kernels",
    ),
    costs_case("not-json", "c.json", "{", f"{C}.json: got 'unparsable file', expected valid JSON (..."),
    costs_case(
        "toml-nan",
        "c.toml",
        "[kernels.k]\nalpha = nan\n",
        f"{C}.toml: key 'kernels.k.alpha': got nan, expected a finite time, such as 2.5us, 1ms or 0.5s",
    ),
    costs_case(
        "negative-time",
        "c.toml",
        '[kernels.k]\ntime = "-5us"\n',
        f"{C}.toml: key 'kernels.k.time': got '-5us', expected a non-negative time",
    ),
    costs_case(
        "misspelt-key",
        "c.toml",
        '[kernels.k]\nalhpa = "1us"\n',
        f"{C}.toml: key 'kernels.k.alhpa': got '1us', expected no such key (allowed: default.time, "
        "kernels.<name>.time/alpha/beta) (did you mean 'kernels.k.alpha'?)",
    ),
    costs_case("yaml", "c.yaml", "k: 1", f"{C}.yaml: got '.yaml', expected a .toml or .json cost file"),
]


def calibration_case(id: str, text: str | bytes, error: list[str]) -> Case:
    return run_case(
        f"run-calibration-{id}",
        ["--calibration", "{d}/cal.json", "--out", "{out}", "--", "{program}"],
        error,
        {"cal.json": text},
    )


K = "{d}/cal.json"
CALIBRATION_CASES = [
    calibration_case(
        "binary",
        b"\x00\x9f\x92\x96",
        [
            (
                f"{K}: got 'byte 0x9f at offset 1', expected a calibration file "
                "written by orrery calibrate in UTF-8 text (this is binary or in "
                "another encoding)"
            )
        ],
    ),
    calibration_case(
        "not-json",
        "{",
        [(f"{K}: got 'invalid JSON', expected a calibration file written by orrery calibrate (valid JSON: ...")],
    ),
    calibration_case(
        "a-list",
        "[1, 2]",
        [(f"{K}: got 'a JSON list', expected a calibration file written by orrery calibrate: a JSON object")],
    ),
    calibration_case(
        "without-overrides",
        calibration(),
        [(f"{K}: key 'overrides': got None, expected a JSON object of machine parameters (KEY: value in SI units)")],
    ),
    calibration_case(
        "overrides-a-list",
        calibration([1]),
        [(f"{K}: key 'overrides': got [1], expected a JSON object of machine parameters (KEY: value in SI units)")],
    ),
    calibration_case(
        "another-machine",
        calibration({}, machine="dgx-h100"),
        [f"{K}: key 'machine': got 'dgx-h100', expected a calibration of h100-ib200"],
    ),
    calibration_case(
        "unknown-version",
        calibration({}, orrery_calibration=99),
        [f"{K}: key 'orrery_calibration': got 99, expected version 1 or 2 or 3"],
    ),
    # a bad value inside the calibration is blamed on the calibration file and its key, not on --set
    calibration_case(
        "negative-bandwidth",
        calibration({"pcie.bandwidth": -5}),
        [
            (
                f"{K}: key 'overrides.pcie.bandwidth': got '-5B/s', expected a positive bandwidth, such as "
                f"53.8GB/s, 200Gbps or 2.5e10B/s (a rate of 0 is none) (a calibration of {BUILT_IN})"
            )
        ],
    ),
    calibration_case(
        "nan-in-a-model",
        calibration({"copies.H2D": [{"latency": float("nan"), "bandwidth": 5e10}]}),
        [
            (
                f"{K}: key 'overrides.copies.H2D.0.latency': got nan, expected a finite time, such as "
                f"2.5us, 1ms or 0.5s (a calibration of {BUILT_IN})"
            )
        ],
    ),
    calibration_case(
        "misspelt-key",
        calibration({"pcie.bandwith": 5e10}),
        [
            (
                f"{K}: key 'overrides.pcie.bandwith': got 50000000000.0, expected a parameter of the "
                "machine (did you mean 'pcie.bandwidth'?)"
            )
        ],
    ),
]

RUN_VALUE_CASES = [
    run_case(
        "run-iterations-zero",
        ["--iterations", "0", "--out", "{out}", "--", "{program}"],
        ["--iterations: got 0, expected a positive whole number (the iterations the run's terms are divided by)"],
    ),
    run_case(
        "run-nodes-beyond-the-limit",
        ["--nodes", "99999999999", "--out", "{out}", "--", "{program}"],
        ["--nodes: got 99999999999, expected a number of nodes from 1 to 4096 (Orrery's limit)"],
    ),
    run_case(
        "run-nodes-zero",
        ["--nodes", "0", "--out", "{out}", "--", "{program}"],
        ["--nodes: got 0, expected a number of nodes from 1 to 4096 (Orrery's limit)"],
    ),
    run_case(
        "run-ranks-beyond-the-limit",
        ["--nodes", "4096", "--ranks-per-node", "8", "--out", "{out}", "--", "{program}"],
        ["--nodes: got 4096, expected at most 2048 nodes of 8 ranks: 16384 ranks in all (Orrery's limit)"],
    ),
    run_case(
        "run-ranks-per-node-beyond-the-limit",
        ["--ranks-per-node", "99999", "--out", "{out}", "--", "{program}"],
        ["--ranks-per-node: got 99999, expected a number of ranks per node from 1 to 1024 (Orrery's limit)"],
    ),
    *(
        run_case(
            f"run-{flag[2:]}-{id}",
            [f"{flag}={value}", "--out", "{out}", "--", "{program}"],
            [
                f"{flag}: got '{value}', expected a positive time such as 500ms, 2.5s, 30min or 2h "
                "(a plain number: seconds)"
            ],
        )
        for flag in ("--sim-time-limit", "--wall-time-limit")
        for id, value in (("zero", "0"), ("negative", "-1s"), ("days", "2days"), ("bytes", "4GB"), ("inf", "inf"))
    ),
    run_case(
        "run-gpus-per-node-beyond-the-node",
        ["--gpus-per-node", "5", "--out", "{out}", "--", "{program}"],
        ["--gpus-per-node: got 5, expected between 1 and 4 (GPUs per node of h100-ib200)"],
    ),
    # argparse's own refusals: one line too, and the earlier run's output goes all the same
    run_case(
        "run-nodes-not-a-number",
        ["--nodes", "abc", "--out", "{out}", "--", "{program}"],
        ["orrery run: argument --nodes: invalid int value: 'abc' (see orrery run --help)"],
    ),
    run_case(
        "run-mode-unknown",
        ["--mode", "quantum", "--out", "{out}", "--", "{program}"],
        [
            (
                "orrery run: argument --mode: invalid choice: 'quantum' (choose from 'skeleton', 'twin') (see "
                "orrery run --help)"
            )
        ],
    ),
    run_case(
        "run-unknown-option",
        ["--colour=red", "--out", "{out}", "--", "{program}"],
        ["orrery run: unrecognized arguments: --colour=red (see orrery run --help)"],
    ),
    # refused by run() itself, after the earlier output was cleared
    run_case(
        "run-program-missing",
        ["--out", "{out}", "--", "{d}/no-such-program"],
        ["orrery run: got '{d}/no-such-program', expected an existing program built with Orrery's wrappers"],
    ),
    run_case(
        "run-twin-mode",
        ["--mode", "twin", "--out", "{out}", "--", "{program}"],
        ["--mode: got 'twin', expected skeleton (Twin mode is not implemented yet)"],
    ),
]

OUT_CASES = [
    Case(
        "run-out-is-a-file",
        lambda d: ["run", "--out", f"{d}/f", "--", "/bin/true"],
        ["--out: got '{d}/f', expected a folder (this is a file)"],
        {"f": "x"},
    ),
    Case(
        "run-out-under-a-file",
        lambda d: ["run", "--out", f"{d}/f/sub", "--", "/bin/true"],
        ["--out: got '{d}/f/sub', expected a folder ({d}/f is a file)"],
        {"f": "x"},
    ),
    Case(
        "calibrate-out-is-a-file",
        lambda d: ["calibrate", "--repo", str(REPO), "--out", f"{d}/f"],
        ["--out: got '{d}/f', expected a folder (this is a file)"],
        {"f": "x"},
    ),
    Case(
        "validate-out-is-a-file",
        lambda d: ["validate", "--repo", str(REPO), "--out", f"{d}/f"],
        ["--out: got '{d}/f', expected a folder (this is a file)"],
        {"f": "x"},
    ),
    Case(
        "fit-out-is-a-file",
        lambda d: ["fit", f"{d}/spec.toml", "--out", f"{d}/f"],
        ["--out: got '{d}/f', expected a folder (this is a file)"],
        {"f": "x"},
    ),
    Case(
        "fit-costs-out-is-a-folder",
        lambda d: ["fit", f"{d}/spec.toml", "--out", f"{d}/o", "--costs-out", d],
        ["--costs-out: got '{d}', expected a file (this is a folder)"],
    ),
]


def measured_case(id: str, name: str, text: str | bytes, error: str, *flags: str) -> Case:
    return Case(
        f"calibrate-input-{id}",
        lambda d: [
            "calibrate",
            "--repo",
            str(REPO),
            "--machine",
            "h100-ib200",
            "--input",
            f"{d}/{name}",
            "--out",
            f"{d}/cal",
            *flags,
        ],
        [error],
        {name: text},
    )


def osu(rows: str, header: str = "# Size          Latency (us)") -> str:
    return f"# OSU MPI Latency Test v7.4\n{header}\n{rows}"


def osu_bw(rows: str) -> str:
    return f"# OSU MPI Bandwidth Test v7.4\n# Size      Bandwidth (MB/s)\n{rows}"


CSV = "benchmark,metric,path,buffers,size_bytes,value,unit\n"
IN = "{d}/in"
P2P = ("--p2p-path", "inter-node")
MEASURED_CASES = [
    measured_case(
        "nan-size",
        "in.txt",
        osu("nan 1.5\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'size': got 'nan', expected a whole number, 0 or more",
        *P2P,
    ),
    measured_case(
        "inf-size",
        "in.txt",
        osu("8 1.5\ninf 1.6\n"),
        f"{IN}.txt:4: key 'size': got 'inf', expected a whole number, 0 or more",
        *P2P,
    ),
    measured_case(
        "negative-size",
        "in.txt",
        osu("-8 1.5\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'size': got '-8', expected a whole number, 0 or more",
        *P2P,
    ),
    measured_case(
        "fractional-size",
        "in.txt",
        osu("8.5 1.5\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'size': got '8.5', expected a whole number, 0 or more",
        *P2P,
    ),
    measured_case(
        "zero-latency",
        "in.txt",
        osu("8 0\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'value': got 0.0, expected a positive finite measurement (a time or a rate of 0, a "
        "negative one, nan or inf is no measurement)",
        *P2P,
    ),
    measured_case(
        "negative-latency",
        "in.txt",
        osu("8 1.5\n16 -1.6\n32 1.7\n"),
        f"{IN}.txt:4: key 'value': got -1.6, expected a positive finite measurement (a time or a rate of 0, a "
        "negative one, nan or inf is no measurement)",
        *P2P,
    ),
    measured_case(
        "nan-bandwidth",
        "in.txt",
        osu_bw("8 nan\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'value': got nan, expected a positive finite measurement (a time or a rate of 0, a "
        "negative one, nan or inf is no measurement)",
        *P2P,
    ),
    measured_case(
        "inf-bandwidth",
        "in.txt",
        osu_bw("8 inf\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'value': got inf, expected a positive finite measurement (a time or a rate of 0, a "
        "negative one, nan or inf is no measurement)",
        *P2P,
    ),
    measured_case(
        "zero-bandwidth",
        "in.txt",
        osu_bw("8 0\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'value': got 0.0, expected a positive finite measurement (a time or a rate of 0, a "
        "negative one, nan or inf is no measurement)",
        *P2P,
    ),
    measured_case(
        "bandwidth-at-size-zero",
        "in.txt",
        osu_bw("0 1.5\n16 1.6\n32 1.7\n"),
        f"{IN}.txt:3: key 'size': got 0, expected a size of 1 byte or more for a bandwidth",
        *P2P,
    ),
    measured_case(
        "osu-header-without-rows",
        "in.txt",
        osu(""),
        f"{IN}.txt: got 'no measurements in OSU MPI Latency Test v7.4', expected rows of measurements (a size "
        "and a value each) below the header",
        *P2P,
    ),
    measured_case(
        "csv-header-without-rows",
        "in.csv",
        CSV,
        f"{IN}.csv: got 'no measurements', expected rows of measurements (a size and a value each) below the header",
    ),
    measured_case(
        "csv-short-row",
        "in.csv",
        CSV + "osu_latency,latency,inter-node,D D\n",
        f"{IN}.csv:2: key 'unit': got '', expected one of us, ms, s, MB/s, GB/s (a value without a unit)",
    ),
    measured_case(
        "csv-nan-size",
        "in.csv",
        CSV + "osu_latency,latency,inter-node,D D,nan,1.5,us\n",
        f"{IN}.csv:2: key 'size_bytes': got 'nan', expected a whole number, 0 or more",
    ),
    measured_case(
        "csv-nan-ranks",
        "in.csv",
        "benchmark,metric,path,buffers,size_bytes,value,unit,ranks\nosu_alltoall,collective_latency,,D,8,1.5,us,nan\n",
        f"{IN}.csv:2: key 'ranks': got 'nan', expected a whole number, 1 or more",
    ),
    measured_case(
        "binary",
        "in.txt",
        b"\x7fELF\x02\x01\x01\x00\x00\xff",
        f"{IN}.txt: got 'byte 0xff at offset 9', expected a measurement file in UTF-8 text (this is binary or "
        "in another encoding)",
    ),
]

KERNEL_HEADER = "kernel,grid_x,grid_y,grid_z,block_x,block_y,block_z,time,unit\n"


def kernels_case(id: str, text: str | bytes, error: str) -> Case:
    return Case(
        f"calibrate-kernels-{id}",
        lambda d: [
            "calibrate",
            "--repo",
            str(REPO),
            "--machine",
            "h100-ib200",
            "--kernels",
            f"{d}/k.csv",
            "--out",
            f"{d}/cal",
        ],
        [error],
        {"k.csv": text},
    )


KERNEL_CASES = [
    kernels_case(
        "nan-time",
        KERNEL_HEADER + "k,1,1,1,256,1,1,nan,us\nk,2,1,1,256,1,1,3,us\n",
        "{d}/k.csv:2: key 'row': got 'k,1,1,1,256,1,1,nan,us', expected positive dimensions and time",
    ),
    kernels_case(
        "header-without-rows",
        KERNEL_HEADER,
        "{d}/k.csv: got 'a header without rows', expected a kernel timing table with rows",
    ),
    kernels_case(
        "short-row", KERNEL_HEADER + "k,1,1\n", "{d}/k.csv:2: key 'unit': got '', expected a time unit: us, ms or s"
    ),
    kernels_case(
        "binary",
        b"\xff" * 8,
        "{d}/k.csv: got 'byte 0xff at offset 0', expected a kernel timing table in "
        "UTF-8 text (this is binary or in another encoding)",
    ),
]

SPEC = """program = "prog"
machine = "h100-ib200"
nodes = 1
gpus_per_node = 1
figure = '^time:\\s+(\\S+)'
costs = '''
[kernels.k]
alpha = {alpha}
'''

[parameters.alpha]
initial = "10us"
min = "0s"

[[runs]]
args = ["-n", "8"]
measured = "478us"
"""


def spec(*changes: tuple[str, str]) -> str:
    text = SPEC
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def fit_case(id: str, text: str | bytes, error: list[str], **files: str) -> Case:
    return Case(
        f"fit-{id}", lambda d: ["fit", f"{d}/spec.toml", "--out", f"{d}/fit"], error, {"spec.toml": text, **files}
    )


S = "{d}/spec.toml"
FIT_CASES = [
    fit_case(
        "min-above-max",
        spec(('min = "0s"', 'min = "20us"\nmax = "5us"')),
        [f"{S}: key 'parameters.alpha.min': got 2e-05, expected less than max (5e-06)"],
    ),
    fit_case(
        "initial-outside-its-bounds",
        spec(('min = "0s"', 'min = "0s"\nmax = "5us"')),
        [f"{S}: key 'parameters.alpha.initial': got 1e-05, expected a value within min and max (0.0 to 5e-06)"],
    ),
    fit_case(
        "measured-zero",
        spec(('measured = "478us"', "measured = 0")),
        [f"{S}: key 'runs.0.measured': got 0, expected greater than 0"],
    ),
    fit_case(
        "measured-nan",
        spec(('measured = "478us"', "measured = nan")),
        [f"{S}: key 'runs.0.measured': got nan, expected a finite time, such as 2.5us, 1ms or 0.5s"],
    ),
    fit_case(
        "measured-inf",
        spec(('measured = "478us"', "measured = inf")),
        [f"{S}: key 'runs.0.measured': got inf, expected a finite time, such as 2.5us, 1ms or 0.5s"],
    ),
    fit_case(
        "measured-negative",
        spec(('measured = "478us"', 'measured = "-478us"')),
        [f"{S}: key 'runs.0.measured': got '-478us', expected a non-negative time"],
    ),
    fit_case(
        "measured-row-zero",
        spec(
            ('measured = "478us"', 'row = { gpus = "1" }'),
            ("[[runs]]", '[measured]\nfile = "m.csv"\nvalue = "time_s"\n\n[[runs]]'),
        ),
        ["m.csv: key 'time_s': got '0', expected a positive finite run time in the row selected by runs[0]"],
        **{"m.csv": "gpus,time_s\n1,0\n"},
    ),
    fit_case(
        "figure-without-a-group",
        spec(("figure = '^time:\\s+(\\S+)'", "figure = '^time:'")),
        [
            (
                f"{S}: key 'figure': got '^time:', expected a regular expression with a group, (...), around the "
                "simulated figure (a number)"
            )
        ],
    ),
    fit_case(
        "figure-not-a-regex",
        spec(("figure = '^time:\\s+(\\S+)'", "figure = '^time:(('")),
        [
            (
                f"{S}: key 'figure': got '^time:((', expected a regular expression (missing ), unterminated subpattern "
                "at position ...)"
            )
        ],
    ),
    fit_case(
        "nodes-as-string", spec(("nodes = 1", 'nodes = "1"')), [f"{S}: key 'nodes': got '1', expected a valid integer"]
    ),
    fit_case(
        "nodes-beyond-the-limit",
        spec(("nodes = 1", "nodes = 99999999999")),
        [f"{S}: key 'nodes': got 99999999999, expected a number of nodes from 1 to 4096 (Orrery's limit)"],
    ),
    fit_case(
        "misspelt-key",
        spec(("figure = ", "figur = ")),
        [
            f"{S}: 2 errors",
            f"  {S}: key 'figure': got None, expected this key to be present",
            f"  {S}: key 'figur': got '^time:\\\\s+(\\\\S+)', expected no such key (did you mean 'figure'?)",
        ],
    ),
    Case(
        "fit-costs-out-without-a-cost-file",
        lambda d: ["fit", f"{d}/spec.toml", "--out", f"{d}/o", "--costs-out", f"{d}/c.toml"],
        [f"--costs-out: got '{{d}}/c.toml', expected a spec with a cost file ({S} has no costs)"],
        {
            "spec.toml": spec(
                ("costs = '''\n[kernels.k]\nalpha = {alpha}\n'''\n", ""),
                ('[parameters.alpha]\ninitial = "10us"', '[parameters."mpi.send_overhead_device"]\ninitial = "1us"'),
            )
        },
    ),
    fit_case(
        "binary",
        b"\xc3\x28",
        [
            (
                f"{S}: got 'byte 0xc3 at offset 0', expected a fit spec in UTF-8 text (this is "
                "binary or in another encoding)"
            )
        ],
    ),
]

CASES = (
    MACHINE_CASES
    + SET_CASES
    + COSTS_CASES
    + CALIBRATION_CASES
    + RUN_VALUE_CASES
    + OUT_CASES
    + MEASURED_CASES
    + KERNEL_CASES
    + FIT_CASES
)


def orrery(args: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([ORRERY, *args], capture_output=True, text=True, timeout=TIMEOUT, cwd=REPO, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"orrery {' '.join(args)} did not return within {TIMEOUT} s")


def write_files(d: Path, case: Case) -> None:
    for name, content in case.files.items():
        (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())


def assert_refused(p: subprocess.CompletedProcess, case: Case, d: Path) -> None:
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    expected = [line.replace("{d}", str(d)) for line in case.error]
    expected[0] = "orrery: error: " + expected[0]
    assert len(lines) == len(expected), p.stderr
    for got, want in zip(lines, expected):
        if "..." not in want:
            assert got == want
            continue
        # "...": any text (a parser's own message, a byte offset); the parts in order around it
        first, *middle, last = want.split("...")
        assert got.startswith(first) and got.endswith(last), (got, want)
        at = len(first)
        for part in middle:
            at = got.index(part, at) + len(part)


NOT_RUN = [c for c in CASES if "{out}" not in c.args("")]
RUN = [c for c in CASES if c not in NOT_RUN]


@pytest.mark.parametrize("case", NOT_RUN, ids=[c.id for c in NOT_RUN])
def test_bad_input_is_refused_in_one_line(case, tmp_path):
    write_files(tmp_path, case)
    assert_refused(orrery(case.args(str(tmp_path))), case, tmp_path)


@pytest.fixture(scope="module")
def earlier_run(programs, tmp_path_factory) -> Path:
    """The output folder of a real, successful `orrery run`."""
    out = tmp_path_factory.mktemp("earlier") / "out"
    p = orrery(["run", "--out", str(out), "--", str(programs["device_query"])])
    assert p.returncode == 0, p.stderr
    assert all((out / name).is_file() for name in RUN_OUTPUTS if name != "error.txt")
    return out


@pytest.mark.native
@pytest.mark.skipif(not nvcc_available(), reason="nvcc (CUDA toolkit compiler) is not installed")
@pytest.mark.parametrize("case", RUN, ids=[c.id for c in RUN])
def test_refused_run_is_one_line_and_leaves_no_earlier_results(case, tmp_path, earlier_run, programs):
    out = tmp_path / "out"
    shutil.copytree(earlier_run, out)
    write_files(tmp_path, case)
    args = [
        a.replace("{out}", str(out)).replace("{program}", str(programs["device_query"]))
        for a in case.args(str(tmp_path))
    ]
    assert_refused(orrery(args), case, tmp_path)
    assert sorted(p.name for p in out.iterdir() if p.name in RUN_OUTPUTS) == []
