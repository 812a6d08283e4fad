"""Carry a committed calibration into its built-in machine description.

    orrery calibrate --machine gh200-slingshot --out calibration/gh200-slingshot
    .venv/bin/python calibration/sync_builtin.py gh200-slingshot
    orrery calibrate --machine dgx-h100 --sweeps nccl --out calibration/dgx-h100-nccl
    .venv/bin/python calibration/sync_builtin.py dgx-h100-nccl

rewrites orrery/machines/builtin/MACHINE.toml (the calibration's machine) so that it ships
calibrated: every scalar override of calibration/NAME/calibration.json replaces the
parameter's value in its section, the measured models (copies, messages, gaps, collectives)
are written between the file's BEGIN/END markers, each such parameter's
source names the calibration (where it does not already), and the source of
a measured model the calibration no longer has is removed. Values are written
with their units (the calibration's are SI). Nothing else in
the file changes. tests/unit/test_calibrate.py checks that the built-in
equals its raw description plus the committed calibration.

    .venv/bin/python calibration/sync_builtin.py h100-pcie --into h100-ib200 \
        --keys mpi.send_overhead_device_intra,mpi.recv_overhead_device_intra --why "..."

carries chosen scalar overrides of one machine's calibration into another built-in (the
same MPI stack's per-message costs where no sweep of that machine exists): each value
replaces the parameter's in its section and its source says where it came from and why
("carried: calibration/NAME/calibration.json (...)"). tests/unit/test_calibrate.py checks
that the H100 built-ins carry these values.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from orrery import machines as machine
from orrery.calibration import merge

REPO = Path(__file__).resolve().parents[1]
BEGIN = "# BEGIN measured models (written by calibration/sync_builtin.py from the calibration)"
END = "# END measured models"


def sync(name: str, repo: Path = REPO) -> str:
    """calibration/NAME into the built-in description of the machine it calibrates (its
    calibration.json's `machine`, NAME where it has none): dgx-h100-nccl into dgx-h100.toml."""
    cal_path = repo / "calibration" / name / "calibration.json"
    cal = json.loads(cal_path.read_text())
    toml_path = repo / "orrery" / "machines" / "builtin" / f"{cal.get('machine', name)}.toml"
    overrides = cal["overrides"]
    text = toml_path.read_text()
    cited = f"fitted: calibration/{name}/calibration.json (orrery calibrate; inputs and residuals there)"
    models: dict[str, list[str]] = {}
    for key, value in overrides.items():
        section, field = key.split(".", 1)
        if section in machine.MEASURED_MODELS:
            items = ",\n  ".join(merge.toml_value(v) for v in machine.with_units(key, value))
            models.setdefault(section, []).append(f"{field} = [\n  {items},\n]")
        else:
            text = _set_scalar(text, toml_path, key, value)
        text = _cite(text, key, cited, keep="fitted:")
    # the measured models are written anew: the source of one the calibration no longer has goes
    measured = "|".join(machine.MEASURED_MODELS)
    text = re.sub(
        rf'^"((?:{measured})\.\w+)" = .*\n',
        lambda m: "" if m.group(1) not in overrides else m.group(0),
        text,
        flags=re.M,
    )
    block = "\n\n".join(f"[{section}]\n" + "\n".join(lines) for section, lines in models.items())
    generated = f"{BEGIN}\n{block}\n{END}\n"
    if BEGIN in text:
        text = text[: text.index(BEGIN)] + generated + text[text.index(END) + len(END) + 1 :]
    elif not models:
        pass  # scalars only (an NCCL calibration's): no block of measured models to start
    else:
        text = text.replace("\n[sources]\n", f"\n{generated}\n[sources]\n")
    toml_path.write_text(text)
    return str(toml_path)


def _set_scalar(text: str, toml_path: Path, key: str, value: object) -> str:
    """The description's text with `key`'s value (SI, from a calibration) written with its unit
    in place of the one in its section."""
    section, field = key.split(".", 1)
    block = re.search(rf"^\[{section}\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not block or not re.search(rf"^{field} = .*$", block.group(1), re.M):
        sys.exit(f"{toml_path}: no '{field}' in [{section}] to carry {key} into")
    body = re.sub(
        rf"^{field} = .*$",
        f"{field} = {merge.toml_value(machine.with_units(key, value))}",
        block.group(1),
        count=1,
        flags=re.M,
    )
    return text[: block.start(1)] + body + text[block.end(1) :]


def _cite(text: str, key: str, cited: str, keep: str | None = None) -> str:
    """The description's text with `key`'s source in [sources] (the last section) saying `cited`:
    added at the end, or in place of the one there, unless that one starts with `keep`."""
    line = f'"{key}" = {json.dumps(cited)}'
    source = re.search(rf'^"{re.escape(key)}" = "(.*)"$', text, re.M)
    if source is None:
        return text.rstrip("\n") + f"\n{line}\n"
    if keep is not None and source.group(1).startswith(keep):
        return text
    return text[: source.start()] + line + text[source.end() :]


def carry(name: str, into: str, keys: list[str], why: str, repo: Path = REPO) -> str:
    """Scalar overrides `keys` of calibration/NAME into the built-in description of machine
    `into` (not the machine NAME calibrates): each value replaces the parameter's in its
    section, and its source names the calibration, the machine it was fitted on and `why`."""
    cal_path = repo / "calibration" / name / "calibration.json"
    cal = json.loads(cal_path.read_text())
    toml_path = repo / "orrery" / "machines" / "builtin" / f"{into}.toml"
    text = toml_path.read_text()
    fitted_on = cal.get("machine", name)
    cited = f"carried: calibration/{name}/calibration.json (fitted on {fitted_on} by orrery calibrate): {why}"
    for key in keys:
        if key not in cal["overrides"]:
            sys.exit(f"{cal_path}: no override '{key}' to carry into {into}")
        value = cal["overrides"][key]
        if isinstance(value, list):
            sys.exit(f"{cal_path}: '{key}' is a measured model of {fitted_on}'s routes; only scalars are carried")
        text = _set_scalar(text, toml_path, key, value)
        text = _cite(text, key, cited)
    toml_path.write_text(text)
    return str(toml_path)


if __name__ == "__main__":
    import argparse

    cli = argparse.ArgumentParser(description="Write committed calibrations into built-in descriptions.")
    cli.add_argument("names", nargs="*", default=["gh200-slingshot"], help="calibration/NAME folders")
    cli.add_argument("--into", help="carry scalars of one calibration into this other built-in")
    cli.add_argument("--keys", help="with --into: the comma-separated keys carried")
    cli.add_argument("--why", help="with --into: why these values stand for the other machine's")
    a = cli.parse_args()
    if a.into:
        if len(a.names) != 1 or not a.keys or not a.why:
            cli.error("--into takes one calibration NAME, --keys and --why")
        print(f"sync_builtin: {carry(a.names[0], a.into, a.keys.split(','), a.why)}")
    else:
        for n in a.names:
            print(f"sync_builtin: {sync(n)}")
