"""The docs against the code: the generated machine schema is current, links resolve, and the
README's tour shows commands the CLI takes."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from orrery import cli
from orrery import machines as machine
from orrery.machines import description, schema_doc

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`([^`]+)`")


def prose(text: str) -> str:
    """Markdown without its fenced code blocks (a link-like text in code is not a link)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for line in prose(page.read_text()).splitlines():
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            base, n = slug(m.group(1)), 0
            name = base
            while name in found:  # GitHub numbers repeated headings: name, name-1, name-2
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def relative_links(page: Path) -> list[str]:
    return [target for _, target in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z]+:", target)]


def test_committed_machine_schema_is_what_the_generator_writes():
    committed = (DOCS / "machine-schema.md").read_text()
    assert committed == schema_doc.markdown(), f"docs/machine-schema.md is stale: run `{schema_doc.COMMAND}`"


def test_machine_schema_has_a_row_for_every_parameter_with_its_bounds_and_default():
    page = schema_doc.markdown()
    sections = re.split(r"^## ", page, flags=re.MULTILINE)
    rows = {
        (part.split("\n", 1)[0], m.group(1)): m.group(0)
        for part in sections
        for m in re.finditer(r"^\| `(\w+)` \|.*$", part, re.MULTILINE)
    }
    for key in description.parameter_keys():
        section, field = key.split(".")
        assert (section, field) in rows, key
    assert rows[("node", "gpus")].startswith(
        f"| `gpus` | whole number, 1 to {description.MAX_GPUS_PER_NODE} | required |"
    )
    assert rows[("mpi", "poll_time")].startswith(
        f"| `poll_time` | time, > 0 | `{description.Mpi.model_fields['poll_time'].default!r}s` |"
    )
    assert rows[("mpi", "intra_node")].startswith('| `intra_node` | one of `"direct"`, `"nic"` | `"direct"` |')
    assert rows[("Segment", "latency")].startswith("| `latency` | time, may be negative | required |")
    assert rows[("Segment", "bandwidth")].startswith("| `bandwidth` | bandwidth, > 0 | required |")
    assert rows[("gpudirect", "rdma")].startswith("| `rdma` | `true` or `false` | required |")


def test_schema_doc_refuses_a_field_without_a_description():
    class Section(BaseModel):
        described: int = Field(description="has one")
        bare: int

    with pytest.raises(schema_doc.MissingDescription, match=r"Section\.bare has no description"):
        schema_doc.field_table(Section)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_at_existing_files_and_headings(page):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(REPO / t.partition("#")[0]).resolve() for t in relative_links(REPO / "README.md")}
    assert [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked] == []


def test_readme_begins_with_the_two_commands_ci_runs():
    readme = (REPO / "README.md").read_text()
    first = FENCE.search(readme)
    assert (
        first.group(1)
        == "bash scripts/setup.sh && bash scripts/demo.sh\nbash scripts/setup.sh && .venv/bin/pytest -q\n"
    )
    assert readme.index("```") < readme.index("\n## ")
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    commands = [line for line in ci if line and not line.startswith("#")]
    # the README's test command, then lint, format and types of the same checkout
    assert commands[2:] == [
        first.group(1).splitlines()[1],
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".venv/bin/mypy",
    ]


def tour() -> str:
    readme = (REPO / "README.md").read_text()
    start = readme.index("## A five-minute tour")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end >= 0 else None]


def tour_command_lines() -> list[str]:
    """The shell commands of the tour's code blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in FENCE.findall(tour()):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*", "", line).strip()
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def _subparsers(parser) -> dict:
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return action.choices
    return {}


def named_flags(argv: list[str]) -> list[str]:
    """Problems with a command line's subcommands and flags, walked through the CLI's parser
    without running anything (a shown command may leave out a flag's value)."""
    parser, problems = cli.parser(), []
    words = list(argv)
    while words and _subparsers(parser):
        word = words.pop(0)
        if word not in _subparsers(parser):
            return [f"no subcommand {word!r} (have {', '.join(_subparsers(parser))})"]
        parser = _subparsers(parser)[word]
        if word in ("nvcc", "mpicc", "mpicxx"):
            return []  # the compiler's own options, verbatim
    known = {s for a in parser._actions for s in a.option_strings}
    for word in words:
        if word == "--":
            break
        flag = word.split("=", 1)[0]
        if flag.startswith("--") and flag not in known:
            problems.append(f"{parser.prog} has no flag {flag}")
    return problems


def test_tour_commands_name_existing_subcommands_and_flags():
    text = " ".join(prose(tour()).split())
    shown = [c for c in tour_command_lines() if c.startswith("orrery ")]
    shown += [c for c in INLINE_CODE.findall(text) if c.startswith("orrery ")]
    shown += re.findall(r'"(orrery [^"]+)"', text)  # the wrappers, as a Makefile variable
    # the tour's blocks, its inline commands (machine list and show, calibrate --input, ...) and wrappers
    assert {c.split()[1] for c in shown} >= {
        *("run", "machine", "validate", "calibrate", "report", "sweep", "nvcc", "mpicc", "mpicxx")
    }
    problems = [f"{c}: {p}" for c in shown for p in named_flags(shlex.split(c)[1:])]
    assert not problems


def test_tour_command_lines_parse_and_their_inputs_exist():
    created = {Path(c.split()[-1]).name for c in tour_command_lines() if c.startswith("cp ")}
    outs: list[str] = []
    runs = [c for c in tour_command_lines() if c.startswith("orrery ")]
    assert {shlex.split(c)[1] for c in runs} >= {"run", "machine", "validate", "calibrate"}
    for command in runs:
        args = cli.parser().parse_args(shlex.split(command)[1:])  # raises on a flag it does not take
        if getattr(args, "out", None):
            outs.append(args.out)
        m = getattr(args, "machine", None) or getattr(args, "file", None)
        if m:
            assert m in machine.builtin_names() or m in created or (REPO / m).is_file(), command
        for override in getattr(args, "set", []):
            machine.load("h100-ib200", machine.parse_overrides([override]))  # a key the schema has, in units it takes
        if getattr(args, "costs", None):
            assert (REPO / args.costs).is_file(), command
        if getattr(args, "calibration", None):
            assert any(args.calibration.startswith(o + "/") for o in outs), f"{command}: made by no command before it"


def test_every_committed_calibration_is_documented_with_its_command_and_report():
    page = (DOCS / "calibration.md").read_text()
    flat = " ".join(page.split())
    shown = {" ".join(c.split()) for c in INLINE_CODE.findall(flat) if c.startswith("orrery calibrate")}
    links = {(DOCS / t).resolve() for t in relative_links(DOCS / "calibration.md")}
    missing = []
    for cal in sorted((REPO / "calibration").glob("*/calibration.json")):
        folder = cal.parent.name
        command = json.loads(cal.read_text())["command"] + f" --out calibration/{folder}"
        sweeps = re.search(r"--sweeps (\S+)", command)
        template = command.replace(sweeps.group(1), "SET") if sweeps else None
        if command not in shown and template not in shown:
            missing.append(f"{folder}: command `{command}`")
        if (cal.parent / "report.txt").resolve() not in links:
            missing.append(f"{folder}: no link to its report.txt")
    assert not missing
