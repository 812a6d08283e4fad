"""The docs against the code: the generated machine schema is current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

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
    return [target for _, target in LINK.findall(prose(page.read_text()))
            if not re.match(r"[a-z]+:", target)]


def test_committed_machine_schema_is_what_the_generator_writes():
    committed = (DOCS / "machine-schema.md").read_text()
    assert committed == schema_doc.markdown(), f"docs/machine-schema.md is stale: run `{schema_doc.COMMAND}`"


def test_machine_schema_has_a_row_for_every_parameter_with_its_bounds_and_default():
    page = schema_doc.markdown()
    sections = re.split(r"^## ", page, flags=re.MULTILINE)
    rows = {(part.split("\n", 1)[0], m.group(1)): m.group(0)
            for part in sections for m in re.finditer(r"^\| `(\w+)` \|.*$", part, re.MULTILINE)}
    for key in description.parameter_keys():
        section, field = key.split(".")
        assert (section, field) in rows, key
    assert rows[("node", "gpus")].startswith(
        f"| `gpus` | whole number, 1 to {description.MAX_GPUS_PER_NODE} | required |")
    assert rows[("mpi", "poll_time")].startswith(
        f"| `poll_time` | time, > 0 | `{description.Mpi.model_fields['poll_time'].default!r}s` |")
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
