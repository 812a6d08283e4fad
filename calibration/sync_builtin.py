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
            text = text[: block.start(1)] + body + text[block.end(1) :]
        source = re.search(rf'^"{re.escape(key)}" = "(.*)"$', text, re.M)
        if source is None:
            text = text.rstrip("\n") + f'\n"{key}" = {json.dumps(cited)}\n'
        elif not source.group(1).startswith("fitted:"):
            text = text[: source.start(1)] + cited + text[source.end(1) :]
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


if __name__ == "__main__":
    for n in sys.argv[1:] or ["gh200-slingshot"]:
        print(f"sync_builtin: {sync(n)}")
