"""Regenerate nvml_symbols.txt from NVML's header.

`python interpose/nvml/list_nvml_symbols.py NVML_H` rewrites nvml_symbols.txt beside this script
from an nvml.h (the nvidia-nvml-dev-cu12 wheel's nvidia/nvml_dev/include/nvml.h, which
scripts/setup.sh extracts into .venv/nvml/include). Run it when Orrery moves to a new NVML, and
commit the result: the build reads the committed file and needs no NVML.

Why from the header: libnvidia-ml.so.1 comes with the GPU driver, which a machine without a GPU
does not have. The header declares every function the library exports: the current ones, and
under NVML_NO_UNVERSIONED_FUNC_DEFS the older versions a program built against an older header
calls (nvmlInit, nvmlDeviceGetCount, ... beside nvmlInit_v2, nvmlDeviceGetCount_v2); each is
declared as `nvmlReturn_t DECLDIR name(` (or another return type before DECLDIR).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DECLARED = re.compile(r"\bDECLDIR\b[^;(]*?\b(nvml\w+)\s*\(")


def symbols(header: str) -> list[str]:
    """Every function the header declares, sorted."""
    text = re.sub(r"/\*.*?\*/", "", header, flags=re.DOTALL)  # a comment's examples are no declarations
    return sorted(set(DECLARED.findall(text)))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: list_nvml_symbols.py NVML_H", file=sys.stderr)
        return 2
    header = Path(argv[0])
    text = header.read_text()
    version = re.search(r"#define NVML_API_VERSION_STR\s+\"(\d+)\"", text)
    names = symbols(text)
    lines = [
        "# Every function the real libnvidia-ml.so.1 exports, as NVML's header declares them",
        f"# (list_nvml_symbols.py from {header.name}, NVML API version {version[1] if version else '?'}:",
        "# the nvidia-nvml-dev-cu12 12.9.79 wheel's nvidia/nvml_dev/include/nvml.h), the older versions",
        "# declared under NVML_NO_UNVERSIONED_FUNC_DEFS included. Lines starting with # are comments.",
        *names,
    ]
    (HERE / "nvml_symbols.txt").write_text("\n".join(lines) + "\n")
    print(f"{len(names)} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
