"""Regenerate cuda13_driver_symbols.txt and cuda13_driver_versions.txt from a CUDA toolkit's headers.

`python interpose/driver/list_driver_symbols.py [CUDA_HOME]` (default /usr/local/cuda) rewrites both
files beside this script. Run it when Orrery moves to a new CUDA release, and commit the result:
the build reads the committed files and needs no toolkit.

Why from the headers: a machine without the driver has no libcuda.so.1 to run `nm -D` on, and
the toolkit here ships no stub libcuda.so. The real library is built from these same headers
with `__CUDA_API_VERSION_INTERNAL` defined, under which each API's macro-mapped names
(cuMemAlloc -> cuMemAlloc_v2, cuMemcpy -> cuMemcpy_ptds, ...) are declared, and then the
legacy plain names again: the union of what the headers declare with and without it is the
set of functions libcuda.so.1 exports (cuda.h, cudaProfiler.h and the graphics interop
headers, whose GL/EGL/VDPAU includes are stubbed out: preprocessing needs no types).

cuda13_driver_versions.txt is what cuGetProcAddress needs: the typedef headers (cudaTypedefs.h
and the interop ones) name each version of an API by the CUDA version that introduced it
(PFN_cuMemAlloc_v2000, PFN_cuMemAlloc_v3020); the k-th of them is the symbol with suffix _v<k>
(none for the first), and a _ptds/_ptsz typedef is the per-thread variant of the version in
force then. A row whose symbol the library does not export is left out.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADERS = ("cuda.h", "cudaProfiler.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h")
TYPEDEFS = ("cudaTypedefs.h", "cudaProfilerTypedefs.h", "cudaGLTypedefs.h", "cudaEGLTypedefs.h", "cudaVDPAUTypedefs.h")
STUBBED = ("GL/gl.h", "EGL/egl.h", "EGL/eglext.h", "vdpau/vdpau.h")


def preprocess(cuda: Path, headers: tuple[str, ...], internal: bool) -> str:
    with tempfile.TemporaryDirectory() as stubs:
        for name in STUBBED:
            (Path(stubs) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(stubs) / name).write_text("")
        source = "".join(f"#include <{h}>\n" for h in headers)
        cmd = ["gcc", "-E", "-P", "-x", "c", f"-I{cuda / 'include'}", f"-I{stubs}", "-"]
        if internal:
            cmd.insert(2, "-D__CUDA_API_VERSION_INTERNAL")
        return subprocess.run(cmd, input=source, capture_output=True, text=True, check=True).stdout


def exported(cuda: Path) -> list[str]:
    names: set[str] = set()
    for internal in (False, True):
        text = preprocess(cuda, HEADERS, internal)
        names |= set(re.findall(r"\bCUresult\s+(cu\w+)\s*\(", text))
    return sorted(names)


def versions(cuda: Path, symbols: set[str]) -> tuple[list[tuple[str, int, str]], list[str]]:
    text = preprocess(cuda, TYPEDEFS, False) + preprocess(cuda, TYPEDEFS, True)
    found = set(re.findall(r"\(\s*\*\s*PFN_(cu\w+?)_v(\d+)(_pt(?:ds|sz))?\s*\)", text))
    plain: dict[str, list[int]] = defaultdict(list)
    for base, version, ptds in found:
        if not ptds:
            plain[base].append(int(version))
    rows, skipped = [], []

    def symbol_of(base: str, version: int) -> str | None:
        older = sorted(v for v in plain.get(base, []) if v <= version)
        if not older:
            return None
        k = len(older)
        return base if k == 1 else f"{base}_v{k}"

    for base, version, ptds in sorted(found):
        name = symbol_of(base, int(version))
        if name is not None and ptds:
            name += ptds
        if name is None or name not in symbols:
            skipped.append(f"PFN_{base}_v{version}{ptds}")
            continue
        rows.append((base + ptds, int(version), name))
    return sorted(rows), skipped


def main(argv: list[str]) -> None:
    cuda = Path(argv[0] if argv else "/usr/local/cuda")
    version = re.search(r"#define CUDA_VERSION (\d+)", (cuda / "include" / "cuda.h").read_text())
    assert version, "cuda.h defines no CUDA_VERSION"
    symbols = exported(cuda)
    head = (
        f"# Every function libcuda.so.1 of CUDA_VERSION {version.group(1)} exports, one a line.\n"
        f"# Made by interpose/driver/list_driver_symbols.py from {cuda}/include (cuda.h, cudaProfiler.h and\n"
        "# the GL/EGL/VDPAU interop headers, preprocessed with and without __CUDA_API_VERSION_INTERNAL):\n"
        "# rerun it rather than editing this file.\n"
    )
    (HERE / "cuda13_driver_symbols.txt").write_text(head + "".join(f"{s}\n" for s in symbols))
    rows, skipped = versions(cuda, set(symbols))
    head = (
        f"# cuGetProcAddress's table for CUDA_VERSION {version.group(1)}: base name (with _ptds/_ptsz for the\n"
        "# per-thread variant), the CUDA version that introduced it, the symbol it is.\n"
        f"# Made by interpose/driver/list_driver_symbols.py from {cuda}/include's typedef headers.\n"
        "# Not exported, so left out: " + (" ".join(skipped) or "none") + "\n"
    )
    (HERE / "cuda13_driver_versions.txt").write_text(head + "".join(f"{b} {v} {s}\n" for b, v, s in rows))
    print(f"{len(symbols)} symbols, {len(rows)} versioned entry points ({len(skipped)} left out)")


if __name__ == "__main__":
    main(sys.argv[1:])
