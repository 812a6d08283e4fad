"""Generate what the shim's call tables imply: its exports, its refusals, its policies, its docs.

Inputs (under interpose/): cudart/cuda_api.def (the CUDA runtime calls the shim defines),
mpi/mpi_api.def (the MPI calls it wraps), cudart/cudart13_symbols.txt (every function the real
libcudart.so.13 exports), nccl/nccl_api.def and nccl/nccl2_symbols.txt (the same for NCCL's
stand-in libnccl.so.2), nvml/nvml_api.def and nvml/nvml_symbols.txt (NVML's, libnvidia-ml.so.1)
and supported-calls.head.md (the prose of the supported-calls page).

`gen_exports.py SRC OUT` (CMake runs it at every build) writes into OUT:
  - libcudart.map: the linker version script (soname version libcudart.so.13, which programs
    linked against the real runtime ask for), exporting every table row and every stub;
  - unsupported_stubs.cpp: the bodies of the `generated` REFUSE rows, with their signatures,
    and one stub per remaining libcudart.so.13 function; each stops the run naming the call;
  - call_policy.hpp, call_policy.cpp: orrery::call_policy(name), the policy of every exported
    call (the stubs' is REFUSE), for Twin mode (issue 16) to decide what to forward.
`gen_exports.py --driver SRC OUT` (CMake again) writes the driver stand-in's (libcuda.so.1) from
driver/driver_api.def, driver/cuda13_driver_symbols.txt and driver/cuda13_driver_versions.txt:
  - libcuda.map: its export map (unversioned, as the real library's symbols are);
  - driver_exports.cpp: the bodies of its `generated` REFUSE rows, a refusing stub for every other
    function libcuda.so.1 exports, and cuGetProcAddress's table of versioned entry points.
libcudart.map also has the private version node ORRERY_PRIVATE: the functions of libcudart.so.13
that its sibling stand-ins (libcuda.so.1, libnccl.so.2) call into, which no program links against.
`gen_exports.py --nccl SRC OUT` writes NCCL's stand-in's into OUT:
  - libnccl.map: its version script (unversioned, as the real library's symbols are);
  - nccl_stubs.cpp: the bodies of nccl_api.def's `generated` REFUSE rows and one stub per
    remaining libnccl.so.2 function; each stops the run naming the call, through libcudart.so.13.
`gen_exports.py --nvml SRC OUT` writes NVML's stand-in's (libnvidia-ml.so.1) the same way, from
nvml/nvml_api.def and nvml/nvml_symbols.txt: libnvidia-ml.map and nvml_stubs.cpp.
`gen_exports.py --doc FILE` writes docs/supported-calls.md (committed; tests/unit/test_contracts.py
checks that it is what this script writes).

Not here: the prototypes the shim is compiled against. cudart/cuda_api.h and mpi/mpi.cpp expand
the tables with the C preprocessor, so the compiler, not this script, reads the signatures.
"""

import re
import sys
from dataclasses import dataclass
from pathlib import Path

POLICIES = ("SIMULATE", "ANSWER", "BOOKKEEP", "FORWARD_TIMED", "REFUSE")
CUDA_FAMILIES = ("launch", "function", "device", "memory", "stream_event", "graph", "errors", "generated")
# the MPI rows whose bodies mpi.cpp's macros write from the row, and the family each stands for
MPI_GENERATED = {
    "ORR_MPI": "blocking",
    "ORR_MPI_DATA": "data",
    "ORR_MPI_COLL": "collective",
    "ORR_MPI_POST": "nonblocking",
    "ORR_MPI_ONE_SIDED": "one_sided",
    "ORR_MPI_ONE_SIDED_POST": "one_sided",
}
# answered: calls whose answer SMPI gets wrong on Orrery's platform, which the shim answers itself
# extension: Open MPI's queries that SMPI lacks (mpi/mpi-ext.h), which the shim answers itself
MPI_FAMILIES = (
    "point_to_point",
    "persistent",
    "completion",
    "probe",
    "lifecycle",
    "windows",
    "answered",
    "extension",
    *dict.fromkeys(MPI_GENERATED.values()),
)
DOC_COMMAND = "python interpose/gen_exports.py --doc docs/supported-calls.md"
# The families of the NCCL calls the stand-in simulates (nccl/<family>.cpp).
NCCL_FAMILIES = ("communicators", "groups", "collectives", "generated")
# Why every NCCL function without a row of its own stops the run (orrery_private_refuse's reason).
NCCL_REFUSAL = "Orrery's NCCL simulates the calls docs/supported-calls.md lists, not this one"
# The same for NVML's stand-in (nvml/<family>.cpp) and its refusals.
NVML_FAMILIES = ("system", "devices", "generated")
NVML_REFUSAL = "Orrery's NVML answers the calls docs/supported-calls.md lists, not this one"


class TableError(ValueError):
    """A row of a table that the shim could not be built from."""


@dataclass(frozen=True)
class Call:
    """One row of a table: a function the shim defines."""

    symbol: str  # as the program links it
    ret: str
    params: str  # with its parentheses
    args: str  # with its parentheses
    family: str
    policy: str
    table: str  # the file it is a row of, for error messages

    @property
    def declaration(self) -> str:
        return f"{self.ret} {self.symbol}{self.params}"


def rows(text: str, macros: tuple[str, ...], table: str) -> list[tuple[str, list[str]]]:
    """The rows `MACRO(field, field, ...)` of an X-macro table, each field stripped; a field's
    own parentheses (a parameter list) keep their commas."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    found = []
    for m in re.finditer(r"^(\w+)\(", text, flags=re.MULTILINE):
        if m.group(1) not in macros:
            raise TableError(f"{table}: unknown row kind {m.group(1)} (expected one of {', '.join(macros)})")
        depth, field, fields, i = 1, "", [], m.end()
        while depth:
            c = text[i]
            depth += {"(": 1, ")": -1}.get(c, 0)
            if depth == 1 and c == ",":
                fields.append(field.strip())
                field = ""
            elif depth:
                field += c
            i += 1
        fields.append(field.strip())
        found.append((m.group(1), fields))
    return found


def table_calls(path: Path, macro: str) -> list[Call]:
    """The rows of a stand-in's table whose rows are ``MACRO(name, return type, parameters,
    arguments, family, policy)`` (cuda_api.def, driver_api.def, nccl_api.def)."""
    calls = []
    for _, f in rows(path.read_text(), (macro,), path.name):
        if len(f) != 6:
            raise TableError(
                f"{path.name}: {f[0]}: expected 6 fields (name, return type, parameters, "
                f"arguments, family, policy), got {len(f)}"
            )
        calls.append(Call(f[0], f[1], f[2], f[3], f[4], f[5], path.name))
    return calls


def cuda_calls(src: Path) -> list[Call]:
    return table_calls(src / "cudart" / "cuda_api.def", "ORR_CUDA")


def mpi_calls(src: Path) -> list[Call]:
    path = src / "mpi" / "mpi_api.def"
    calls = []
    for macro, f in rows(path.read_text(), (*MPI_GENERATED, "ORR_MPI_OWN"), path.name):
        if macro == "ORR_MPI_OWN":
            if len(f) != 6:
                raise TableError(
                    f"{path.name}: {f[0]}: expected 6 fields (symbol, return type, parameters, "
                    f"arguments, family, policy), got {len(f)}"
                )
            calls.append(Call(f[0], f[1], f[2], f[3], f[4], f[5], path.name))
        else:
            calls.append(Call(f"MPI_{f[0]}", "int", f[1], f[2], MPI_GENERATED[macro], "SIMULATE", path.name))
    return calls


def real_cudart(src: Path) -> list[str]:
    return (src / "cudart" / "cudart13_symbols.txt").read_text().split()


def check_rows(calls: list[tuple[Call, tuple[str, ...]]]) -> None:
    """Stops at a row of any table, with the families its table allows, that no build could use."""
    seen: set[str] = set()
    for c, families in calls:
        if c.symbol in seen:
            raise TableError(f"{c.table}: {c.symbol} has two rows")
        seen.add(c.symbol)
        if c.policy not in POLICIES:
            raise TableError(f"{c.table}: {c.symbol}: policy {c.policy!r}, expected one of {', '.join(POLICIES)}")
        if c.family not in families:
            raise TableError(f"{c.table}: {c.symbol}: family {c.family!r}, expected one of {', '.join(families)}")
        if not (
            c.params.startswith("(") and c.params.endswith(")") and c.args.startswith("(") and c.args.endswith(")")
        ):
            raise TableError(f"{c.table}: {c.symbol}: parameters and arguments are parenthesised lists")


def check(cuda: list[Call], mpi: list[Call], real: list[str]) -> None:
    """Stops at a row the build would get wrong (the compiler checks the signatures)."""
    check_rows([(c, CUDA_FAMILIES) for c in cuda] + [(c, MPI_FAMILIES) for c in mpi])
    for c in cuda:
        if c.symbol not in real:
            raise TableError(f"{c.table}: {c.symbol} is not a function libcudart.so.13 exports (cudart13_symbols.txt)")
        if c.family == "generated" and c.policy == "FORWARD_TIMED":
            raise TableError(
                f"{c.table}: {c.symbol}: FORWARD_TIMED needs Twin mode's forwarding (issue 16), "
                "which gen_exports.py cannot generate yet"
            )
        if c.family == "generated" and c.policy != "REFUSE":
            raise TableError(f"{c.table}: {c.symbol}: a generated body can only refuse (policy REFUSE)")
    for c in mpi:
        if c.family in ("answered", "extension") and c.policy != "ANSWER":
            raise TableError(
                f"{c.table}: {c.symbol}: a call of the family {c.family} is answered by the shim without SMPI "
                "(policy ANSWER)"
            )


def stubs(cuda: list[Call], real: list[str]) -> list[str]:
    """The libcudart.so.13 functions without a row: refused, signature unknown."""
    rowed = {c.symbol for c in cuda}
    return [s for s in real if s not in rowed]


def refusals(calls: list[Call], real: list[str], export: str, refuse: str, library: str) -> list[str]:
    """The refusing bodies of a stand-in's generated source: its table's `generated` REFUSE rows,
    with their signatures, then a stub for every other function the real `library` exports; each
    body is `refuse` with the function's name (a format with one {})."""
    body = [
        f"{export} {c.ret} {c.symbol}{c.params} {{ {refuse.format(c.symbol)}; }}"
        for c in calls
        if c.family == "generated"
    ]
    body += ["", f"// every other function of {library}", 'extern "C" {']
    body += [f"{export} int {s}(void) {{ {refuse.format(s)}; }}" for s in stubs(calls, real)]
    return [*body, "}"]


def stubs_cpp(cuda: list[Call], real: list[str]) -> str:
    body = [
        "// Generated by gen_exports.py from cuda_api.def and cudart13_symbols.txt: do not edit.",
        '#include "core/runtime.hpp"',
        '#include "cudart/cuda_api.h"',
        "",
        "// cuda_api.def's generated REFUSE rows",
    ]
    body += refusals(cuda, real, "ORR_EXPORT", 'orrery::unsupported("{}")', "libcudart.so.13")
    return "\n".join(body) + "\n"


def version_script(cuda: list[Call], mpi: list[Call], real: list[str]) -> str:
    names = [c.symbol for c in cuda] + stubs(cuda, real) + [c.symbol for c in mpi]
    exports = "\n".join(f"    {n};" for n in names)
    return f"libcudart.so.13 {{\n  global:\n{exports}\n  local: *;\n}};\n" + PRIVATE_NODE


# What the sibling stand-ins (libcuda.so.1, libnccl.so.2) call in libcudart.so.13, where the run's
# state lives: functions named orrery_private_*, and the core's C++ interface (core/runtime.hpp,
# ranks.hpp, fatal.hpp: libnccl.so.2's collectives are the core's stream operations), in a version
# node of their own so that no program links them by accident.
# The names of namespace orrery's functions and variables, mangled (a demangled glob, `orrery::*`,
# also matched the standard library's templates that return one of its types, which it would export).
PRIVATE_NODE = "ORRERY_PRIVATE {\n  global:\n    orrery_private_*;\n    _ZN6orrery*;\n    _ZNK6orrery*;\n};\n"


def policies(cuda: list[Call], mpi: list[Call], real: list[str]) -> dict[str, str]:
    """Every exported call's policy."""
    out = {c.symbol: c.policy for c in cuda + mpi}
    out.update((s, "REFUSE") for s in stubs(cuda, real))
    return dict(sorted(out.items()))


CALL_POLICY_HPP = """\
// Generated by gen_exports.py from cuda_api.def, mpi_api.def and cudart13_symbols.txt: do not edit.
#ifndef ORRERY_CALL_POLICY_HPP
#define ORRERY_CALL_POLICY_HPP

#include <optional>
#include <string_view>

namespace orrery {
// what the shim does with a call (interpose/cudart/cuda_api.def explains each)
enum class CallPolicy { %(policies)s };
// The policy of an exported call (a CUDA runtime function without a row: REFUSE); none for
// a name the shim does not export.
std::optional<CallPolicy> call_policy(std::string_view name);
}  // namespace orrery
#endif
"""

CALL_POLICY_CPP = """\
// Generated by gen_exports.py from cuda_api.def, mpi_api.def and cudart13_symbols.txt: do not edit.
#include "call_policy.hpp"

#include <algorithm>
#include <iterator>
#include <utility>

namespace orrery {
namespace {
// sorted by name, for a binary search
constexpr std::pair<std::string_view, CallPolicy> kPolicies[] = {
%(entries)s
};
}  // namespace

std::optional<CallPolicy> call_policy(std::string_view name) {
  auto it = std::lower_bound(std::begin(kPolicies), std::end(kPolicies), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  if (it == std::end(kPolicies) || it->first != name)
    return std::nullopt;
  return it->second;
}
}  // namespace orrery
"""


def call_policy_sources(cuda: list[Call], mpi: list[Call], real: list[str]) -> tuple[str, str]:
    entries = "\n".join(f'    {{"{n}", CallPolicy::{p}}},' for n, p in policies(cuda, mpi, real).items())
    return CALL_POLICY_HPP % {"policies": ", ".join(POLICIES)}, CALL_POLICY_CPP % {"entries": entries}


# ---- the stand-ins of libraries beside the runtime (libnccl.so.2, libnvidia-ml.so.1): a table of
# their own and stubs, refusing through libcudart.so.13 ----


@dataclass(frozen=True)
class Sibling:
    """A stand-in library with a table of its own (interpose/<folder>/<table>): its rows' macro,
    the list of every function the real `library` exports, its families and why a function
    without a row stops the run."""

    folder: str
    table: str
    macro: str
    symbols: str
    library: str
    families: tuple[str, ...]
    refusal: str
    export: str  # the attribute its api header defines for a definition it exports

    def calls(self, src: Path) -> list[Call]:
        return table_calls(src / self.folder / self.table, self.macro)

    def real(self, src: Path) -> list[str]:
        lines = (src / self.folder / self.symbols).read_text().splitlines()
        return [line.strip() for line in lines if line.strip() and not line.startswith("#")]

    def check(self, calls: list[Call], real: list[str]) -> None:
        check_rows([(c, self.families) for c in calls])
        for c in calls:
            if c.symbol not in real:
                raise TableError(f"{c.table}: {c.symbol} is not a function {self.library} exports ({self.symbols})")
            if c.family == "generated" and c.policy != "REFUSE":
                raise TableError(f"{c.table}: {c.symbol}: a generated body can only refuse (policy REFUSE)")

    def stubs_cpp(self, calls: list[Call], real: list[str]) -> str:
        body = [
            f"// Generated by gen_exports.py from {self.table} and {self.symbols}: do not edit.",
            '#include "core/fatal.hpp"',
            f'#include "{self.folder}/{self.table.replace(".def", ".h")}"',
            "",
            f'static constexpr char kRefusal[] = "{self.refusal}";',
            "",
            f"// {self.table}'s generated REFUSE rows",
        ]
        refuse = 'orrery_private_refuse("{}", kRefusal)'
        body += refusals(calls, real, self.export, refuse, self.library)
        return "\n".join(body) + "\n"

    def write_build(self, src: Path, out: Path) -> None:
        calls, real = self.calls(src), self.real(src)
        self.check(calls, real)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{self.folder}_stubs.cpp").write_text(self.stubs_cpp(calls, real))
        (out / f"{self.library.split('.so')[0]}.map").write_text(unversioned_script(calls, real))


NCCL = Sibling(
    "nccl", "nccl_api.def", "ORR_NCCL", "nccl2_symbols.txt", "libnccl.so.2", NCCL_FAMILIES, NCCL_REFUSAL,
    "ORR_NCCL_EXPORT",
)  # fmt: skip
NVML = Sibling(
    "nvml", "nvml_api.def", "ORR_NVML", "nvml_symbols.txt", "libnvidia-ml.so.1", NVML_FAMILIES, NVML_REFUSAL,
    "ORR_NVML_EXPORT",
)  # fmt: skip
SIBLINGS = {"nccl": NCCL, "nvml": NVML}


def nccl_calls(src: Path) -> list[Call]:
    return NCCL.calls(src)


def real_nccl(src: Path) -> list[str]:
    return NCCL.real(src)


def check_nccl(nccl: list[Call], real: list[str]) -> None:
    NCCL.check(nccl, real)


def unversioned_script(calls: list[Call], real: list[str]) -> str:
    """The export map of a library whose real counterpart exports its symbols without a version
    (libcuda.so.1, libnccl.so.2, libnvidia-ml.so.1): one node without a name, every row and every
    stub."""
    names = [c.symbol for c in calls] + stubs(calls, real)
    exports = "\n".join(f"    {n};" for n in names)
    return f"{{\n  global:\n{exports}\n  local: *;\n}};\n"


def write_nccl_build(src: Path, out: Path) -> None:
    NCCL.write_build(src, out)


def call_table(calls: list[Call]) -> str:
    lines = ["| call | policy | signature |", "|---|---|---|"]
    lines += [f"| `{c.symbol}` | {c.policy} | `{c.declaration}` |" for c in calls]
    return "\n".join(lines)


def render_doc(src: Path) -> str:
    """docs/supported-calls.md: the head's prose, each `@TABLE family@` line replaced by the
    family's rows, `@COUNT stubs@` by the number of refused functions without a row (`@COUNT
    nccl stubs@`: NCCL's)."""
    cuda, mpi, real = cuda_calls(src), mpi_calls(src), real_cudart(src)
    check(cuda, mpi, real)
    nccl, nccl_real = nccl_calls(src), real_nccl(src)
    check_nccl(nccl, nccl_real)
    nvml, nvml_real = NVML.calls(src), NVML.real(src)
    NVML.check(nvml, nvml_real)
    head_path = src / "supported-calls.head.md"
    head = head_path.read_text()
    families = {("cuda", f): [c for c in cuda if c.family == f] for f in CUDA_FAMILIES}
    families |= {("mpi", f): [c for c in mpi if c.family == f] for f in MPI_FAMILIES}
    driver, real_cuda = driver_calls(src), real_driver(src)
    check_driver(driver, real_cuda)
    families |= {("driver", f): [c for c in driver if c.family == f] for f in DRIVER_FAMILIES}
    families |= {("nccl", f): [c for c in nccl if c.family == f] for f in NCCL_FAMILIES}
    families |= {("nvml", f): [c for c in nvml if c.family == f] for f in NVML_FAMILIES}
    used = set()

    def table(m: re.Match) -> str:
        key = (m.group(1), m.group(2))
        if key not in families:
            raise TableError(f"{head_path.name}: @TABLE {key[0]} {key[1]}@ names no family of the tables")
        used.add(key)
        return call_table(families[key])

    doc = re.sub(r"^@TABLE (cuda|mpi|driver|nccl|nvml) (\w+)@$", table, head, flags=re.MULTILINE)
    missing = [f"{t} {f}" for (t, f), calls in families.items() if calls and (t, f) not in used]
    if missing:
        raise TableError(f"{head_path.name}: no @TABLE line for the families {', '.join(missing)}")
    doc = doc.replace("@COUNT stubs@", str(len(stubs(cuda, real))))
    doc = doc.replace("@COUNT driver_stubs@", str(len(stubs(driver, real_cuda))))
    doc = doc.replace("@COUNT nccl stubs@", str(len(stubs(nccl, nccl_real))))
    doc = doc.replace("@COUNT nvml stubs@", str(len(stubs(nvml, nvml_real))))
    generated = (
        f"<!-- Generated by interpose/gen_exports.py from interpose/cudart/cuda_api.def, "
        f"interpose/mpi/mpi_api.def, interpose/driver/driver_api.def, interpose/nccl/nccl_api.def, "
        f"interpose/nvml/nvml_api.def and "
        f"interpose/supported-calls.head.md: edit those and run "
        f"`{DOC_COMMAND}`. -->\n"
    )
    return generated + doc


def write_build(src: Path, out: Path) -> None:
    cuda, mpi, real = cuda_calls(src), mpi_calls(src), real_cudart(src)
    check(cuda, mpi, real)
    out.mkdir(parents=True, exist_ok=True)
    header, source = call_policy_sources(cuda, mpi, real)
    files = {
        "unsupported_stubs.cpp": stubs_cpp(cuda, real),
        "libcudart.map": version_script(cuda, mpi, real),
        "call_policy.hpp": header,
        "call_policy.cpp": source,
    }
    for name, text in files.items():
        (out / name).write_text(text)


# ---- the CUDA driver stand-in, libcuda.so.1 (driver/) ----

DRIVER_FAMILIES = ("device", "context", "memory", "stream", "module", "vmm", "entry", "errors", "generated")


def driver_calls(src: Path) -> list[Call]:
    return table_calls(src / "driver" / "driver_api.def", "ORR_CU")


def _listed(path: Path) -> list[str]:
    """A committed list, one entry a line, `#` lines saying how it was made."""
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def real_driver(src: Path) -> list[str]:
    return _listed(src / "driver" / "cuda13_driver_symbols.txt")


def driver_versions(src: Path) -> list[tuple[str, int, str]]:
    """cuGetProcAddress's entries: (base name, CUDA version that introduced it, symbol)."""
    out = []
    for line in _listed(src / "driver" / "cuda13_driver_versions.txt"):
        base, version, symbol = line.split()
        out.append((base, int(version), symbol))
    return sorted(out)


def check_driver(calls: list[Call], real: list[str]) -> None:
    seen: set[str] = set()
    for c in calls:
        if c.symbol in seen:
            raise TableError(f"{c.table}: {c.symbol} has two rows")
        seen.add(c.symbol)
        if c.policy not in POLICIES or c.policy == "FORWARD_TIMED":
            raise TableError(
                f"{c.table}: {c.symbol}: policy {c.policy!r}, expected one of SIMULATE, ANSWER, BOOKKEEP, REFUSE"
            )
        if c.family not in DRIVER_FAMILIES:
            raise TableError(
                f"{c.table}: {c.symbol}: family {c.family!r}, expected one of {', '.join(DRIVER_FAMILIES)}"
            )
        if c.symbol not in real:
            raise TableError(
                f"{c.table}: {c.symbol} is not a function libcuda.so.1 exports (cuda13_driver_symbols.txt)"
            )
        if c.family == "generated" and c.policy != "REFUSE":
            raise TableError(f"{c.table}: {c.symbol}: a generated body can only refuse (policy REFUSE)")


def driver_exports_cpp(calls: list[Call], real: list[str], versions: list[tuple[str, int, str]]) -> str:
    body = [
        "// Generated by gen_exports.py from driver_api.def, cuda13_driver_symbols.txt and",
        "// cuda13_driver_versions.txt: do not edit.",
        '#include "driver/driver_api.h"',
        '#include "driver/runtime_bridge.h"',
        "",
        "#define ORR_REFUSE(name) orrery_private_unsupported(name)",
        "",
        "// driver_api.def's generated REFUSE rows",
    ]
    body += refusals(calls, real, "ORR_EXPORT", 'ORR_REFUSE("{}")', "libcuda.so.1")
    body += [
        "",
        "// cuGetProcAddress's entries, sorted by base name and version (driver/entry.cpp searches them)",
        "namespace orrery_driver {",
        "const ProcEntry kProcs[] = {",
    ]
    body += [f'    {{"{b}", {v}, (void*)&{s}}},' for b, v, s in versions]
    body += ["};", "const unsigned kProcCount = sizeof kProcs / sizeof kProcs[0];", "}  // namespace orrery_driver"]
    return "\n".join(body) + "\n"


def write_driver_build(src: Path, out: Path) -> None:
    calls, real, versions = driver_calls(src), real_driver(src), driver_versions(src)
    check_driver(calls, real)
    missing = sorted({s for _, _, s in versions} - set(real))
    if missing:
        raise TableError(f"cuda13_driver_versions.txt: {missing[0]} is not in cuda13_driver_symbols.txt")
    out.mkdir(parents=True, exist_ok=True)
    (out / "driver_exports.cpp").write_text(driver_exports_cpp(calls, real, versions))
    (out / "libcuda.map").write_text(unversioned_script(calls, real))


def main(argv: list[str]) -> None:
    src = Path(__file__).resolve().parent
    try:
        if len(argv) == 2 and argv[0] == "--doc":
            Path(argv[1]).write_text(render_doc(src))
        elif len(argv) == 3 and argv[0] == "--driver":
            write_driver_build(Path(argv[1]), Path(argv[2]))
        elif len(argv) == 3 and argv[0] in ("--nccl", "--nvml"):
            SIBLINGS[argv[0][2:]].write_build(Path(argv[1]), Path(argv[2]))
        elif len(argv) == 2:
            write_build(Path(argv[0]), Path(argv[1]))
        else:
            sys.exit(
                "usage: gen_exports.py SRC OUT | gen_exports.py --driver SRC OUT | gen_exports.py --nccl SRC OUT | "
                "gen_exports.py --nvml SRC OUT | "
                f"gen_exports.py --doc FILE (got {' '.join(argv)})"
            )
    except TableError as e:
        sys.exit(f"gen_exports.py: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
