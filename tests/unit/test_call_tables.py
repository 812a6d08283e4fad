"""The shim's call tables and what interpose/gen_exports.py makes of them: the supported-calls doc,
the policies, and the rows it will not build from. (What the built library exports and refuses:
tests/native/test_exports.py.)"""

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
SHIM = REPO / "interpose"
_spec = importlib.util.spec_from_file_location("gen_exports", SHIM / "gen_exports.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

TABLE_FILES = ["cudart/cuda_api.def", "cudart/cudart13_symbols.txt", "mpi/mpi_api.def", "supported-calls.head.md"]


def test_supported_calls_doc_is_what_the_tables_generate():
    """docs/supported-calls.md is committed, so that it reads without a build; it must be what
    gen_exports.py writes from the tables today."""
    committed = (REPO / "docs" / "supported-calls.md").read_text()
    assert committed == gen.render_doc(SHIM), f"docs/supported-calls.md is stale: run `{gen.DOC_COMMAND}`"
    for call in gen.cuda_calls(SHIM) + gen.mpi_calls(SHIM):
        assert f"| `{call.symbol}` | {call.policy} | `{call.declaration}` |" in committed
    rowed = {c.symbol for c in gen.cuda_calls(SHIM)}
    assert f"({len(set(gen.real_cudart(SHIM)) - rowed)} more)" in committed


@pytest.fixture
def tables(tmp_path):
    """A copy of the tables to edit; returns (source folder, a function appending to a file)."""
    for name in TABLE_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHIM / name, tmp_path / name)

    def edit(name: str, old: str, new: str) -> None:
        path = tmp_path / name
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))

    return tmp_path, edit


MALLOC = "ORR_CUDA(cudaMalloc, cudaError_t, (void** devPtr, size_t size), (devPtr, size), memory, BOOKKEEP)"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            MALLOC.replace("BOOKKEEP", "SIMULATED"),
            (
                "cuda_api.def: cudaMalloc: policy 'SIMULATED', expected one of SIMULATE, ANSWER, BOOKKEEP, "
                "FORWARD_TIMED, REFUSE"
            ),
        ),
        (
            MALLOC.replace("memory,", "memroy,"),
            (
                "cuda_api.def: cudaMalloc: family 'memroy', expected one of "
                "launch, function, device, memory, stream_event, graph, errors, generated"
            ),
        ),
        (MALLOC + "\n" + MALLOC, "cuda_api.def: cudaMalloc has two rows"),
        (
            MALLOC.replace("cudaMalloc,", "cudaMallocEverything,"),
            "cuda_api.def: cudaMallocEverything is not a function libcudart.so.13 exports (cudart13_symbols.txt)",
        ),
        (
            MALLOC.replace(", memory, BOOKKEEP", ", memory"),
            (
                "cuda_api.def: cudaMalloc: expected 6 fields (name, "
                "return type, parameters, arguments, family, policy), got 5"
            ),
        ),
        (
            MALLOC.replace("memory, BOOKKEEP", "generated, SIMULATE"),
            "cuda_api.def: cudaMalloc: a generated body can only refuse (policy REFUSE)",
        ),
        (
            MALLOC.replace("memory, BOOKKEEP", "generated, FORWARD_TIMED"),
            (
                "cuda_api.def: cudaMalloc: FORWARD_TIMED needs Twin mode's forwarding (issue 16), which "
                "gen_exports.py cannot generate yet"
            ),
        ),
        (
            MALLOC.replace("ORR_CUDA(", "ORR_CUDA_(", 1),
            "cuda_api.def: unknown row kind ORR_CUDA_ (expected one of ORR_CUDA)",
        ),
    ],
)
def test_a_row_the_build_would_get_wrong_stops_the_generator_naming_it(tables, tmp_path, row, message):
    src, edit = tables
    edit("cudart/cuda_api.def", MALLOC, row)
    out = tmp_path / "generated"
    p = subprocess.run(
        [sys.executable, str(SHIM / "gen_exports.py"), str(src), str(out)], check=False, capture_output=True, text=True
    )
    assert (p.returncode, p.stderr) == (1, f"gen_exports.py: {message}\n")
    assert not out.exists()  # nothing half-written


def test_a_written_out_mpi_row_needs_its_family_and_policy(tables):
    src, edit = tables
    edit("mpi/mpi_api.def", "(argc, argv), lifecycle, BOOKKEEP)", "(argc, argv), lifecycle)")
    with pytest.raises(gen.TableError, match=r"^mpi_api.def: MPI_Init: expected 6 fields \(symbol, "):
        gen.mpi_calls(src)


def test_a_forward_timed_row_keeps_its_body_and_says_its_policy(tables, tmp_path):
    # Twin mode (issue 16) turns rows to FORWARD_TIMED: the call stays exported, its own, not a stub
    src, edit = tables
    edit("cudart/cuda_api.def", MALLOC, MALLOC.replace("BOOKKEEP", "FORWARD_TIMED"))
    gen.write_build(src, tmp_path / "generated")
    assert "    cudaMalloc;\n" in (tmp_path / "generated" / "libcudart.map").read_text()
    assert '{"cudaMalloc", CallPolicy::FORWARD_TIMED},' in (tmp_path / "generated" / "call_policy.cpp").read_text()
    assert "cudaMalloc(" not in (tmp_path / "generated" / "unsupported_stubs.cpp").read_text()


def test_every_wrapped_mpi_call_has_one_row():
    # the calls of mpi.cpp that results.json breaks out by name, the run's own (lifecycle), those
    # whose answer SMPI gets wrong and Open MPI's extensions that the shim answers (mpi-ext.h)
    mpi = gen.mpi_calls(SHIM)
    by_family = {f: sorted(c.symbol for c in mpi if c.family == f) for f in gen.MPI_FAMILIES}
    assert by_family["lifecycle"] == sorted(
        ["MPI_Init", "MPI_Init_thread", "MPI_Comm_split_type", "MPI_Abort", "MPI_Finalize", "smpi_exit"]
    )
    assert by_family["answered"] == ["MPI_Get_processor_name", "MPI_Is_thread_main", "MPI_Query_thread"]
    assert by_family["extension"] == ["MPIX_Query_cuda_support", "MPIX_Query_rocm_support"]
    answered = len(by_family["answered"]) + len(by_family["extension"])
    assert by_family["windows"] == ["MPI_Win_allocate_shared", "MPI_Win_free", "MPI_Win_shared_query"]
    assert len(mpi) - len(by_family["lifecycle"]) - answered == 77
    assert by_family["collective"] == sorted(
        f"MPI_{c}"
        for c in (
            "Bcast",
            "Reduce",
            "Allreduce",
            "Gather",
            "Scatter",
            "Allgather",
            "Alltoall",
            "Reduce_scatter",
            "Reduce_scatter_block",
        )
    )
    # the non-blocking collectives' rows, whose request counts as communication until it completes
    assert by_family["nonblocking"] == sorted(
        f"MPI_{c}" for c in ("Iallreduce", "Ibcast", "Ibarrier", "Ireduce", "Iallgather")
    )
    # one-sided communication and its synchronisation (point-to-point time; each message's ends
    # pinned at its buffers by liborrery_smpi.so), MPI_Win_fence a collective's
    assert by_family["one_sided"] == sorted(
        f"MPI_{c}"
        for c in (
            *("Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap"),
            *("Rput", "Rget", "Raccumulate"),
            *("Win_lock", "Win_unlock", "Win_lock_all", "Win_unlock_all"),
            *("Win_flush", "Win_flush_all", "Win_flush_local", "Win_flush_local_all"),
            *("Win_post", "Win_start", "Win_complete", "Win_wait"),
        )
    )
    assert "MPI_Win_fence" in by_family["blocking"]


def test_every_function_mpi_ext_h_declares_is_an_extension_row_answered_by_the_shim():
    """interpose/mpi/mpi-ext.h (installed as orrery/include/mpi-ext.h) and the table's extension
    rows name the same functions, with the same signatures."""
    header = (SHIM / "mpi" / "mpi-ext.h").read_text()
    declared = re.findall(r"^int (MPIX_\w+)\(void\);$", header, re.MULTILINE)
    rows = [c for c in gen.mpi_calls(SHIM) if c.family == "extension"]
    assert sorted(declared) == sorted(c.symbol for c in rows) == ["MPIX_Query_cuda_support", "MPIX_Query_rocm_support"]
    assert {(c.declaration, c.policy) for c in rows} == {(f"int {name}(void)", "ANSWER") for name in declared}


@pytest.mark.parametrize(
    "row",
    [
        "ORR_MPI_OWN(MPIX_Query_cuda_support, int, (void), (), extension, ANSWER)",
        "ORR_MPI_OWN(MPI_Is_thread_main, int, (int* flag), (flag), answered, ANSWER)",
    ],
)
def test_an_answered_row_that_would_call_smpi_stops_the_generator(tables, row):
    src, edit = tables
    edit("mpi/mpi_api.def", row, row.replace("ANSWER", "SIMULATE"))
    symbol, family = row.split("(")[1].split(",")[0], row.split(", ")[-2]
    with pytest.raises(
        gen.TableError,
        match=rf"^mpi_api.def: {symbol}: a call of the family {family} is answered by the shim without SMPI "
        r"\(policy ANSWER\)$",
    ):
        gen.check(gen.cuda_calls(src), gen.mpi_calls(src), gen.real_cudart(src))
