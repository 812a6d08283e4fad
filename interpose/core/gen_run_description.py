"""Generate the shim's side of the run description from its schema (run_description.json).

Writes run_description.hpp (an enum per schema enum, a struct per schema type, each field
with the schema's default, and a writer per row kind of the trace's event file, trace_rows) and run_description.cpp (parse_run_description: the JSON text,
read with nlohmann::json, checked against the schema key by key; a missing, unknown or
ill-typed key stops the run with one line naming the file, the key, the value and what was
expected). The Python side (orrery/run/run_description.py) builds its model from the same
schema, so neither side writes a field, a type or a default of its own.

It also writes run_description_write.cpp (write_run_description: a description back as JSON),
which the shim does not use: tests/native/test_run_description.py reads a description Python
wrote through the generated parser and compares what comes back.

Usage: gen_run_description.py SCHEMA OUT_DIR (stdlib only: CMake runs it at build time).
"""

import json
import re
import sys
from pathlib import Path

PRIMITIVE_CPP = {"bool": "bool", "int": "int64_t", "number": "double", "limit": "double", "string": "std::string"}
EXPECTED = {
    "bool": "true or false",
    "int": "an integer",
    "number": "a number",
    "limit": "a number or null (no limit)",
    "string": "a string",
}


class Schema:
    def __init__(self, data: dict):
        self.enums: dict[str, list[str]] = data["enums"]
        self.types: dict[str, dict] = data["types"]
        self.root: str = data["root"]
        self.readers: dict[str, str] = {}  # type expression -> reader function name
        self.reader_code: list[str] = []

    def cpp(self, t: str) -> str:
        if t in PRIMITIVE_CPP:
            return PRIMITIVE_CPP[t]
        if t.startswith("enum:"):
            return t[5:]
        if t in self.types:
            return t
        inner = _inner(t)
        if t.startswith("list<"):
            return f"std::vector<{self.cpp(inner)}>"
        if t.startswith("map<"):
            return f"std::map<std::string, {self.cpp(inner)}>"
        if t.startswith("optional<"):
            return f"std::optional<{self.cpp(inner)}>"
        sys.exit(f"run_description.json: unknown type '{t}'")

    def expected(self, t: str) -> str:
        if t in EXPECTED:
            return EXPECTED[t]
        if t.startswith("enum:"):
            return "one of " + ", ".join(f"'{v}'" for v in self.enums[t[5:]])
        if t.startswith("list<"):
            return "a list"
        if t.startswith("map<"):
            return "an object"
        if t.startswith("optional<"):
            return f"null or {self.expected(_inner(t))}"
        return f"an object ({t})"

    def reader(self, t: str) -> str:
        """The name of the C++ function that reads a JSON value of type t (made on first use)."""
        if t in self.readers:
            return self.readers[t]
        name = "read_" + re.sub(r"\W+", "_", t).strip("_")
        self.readers[t] = name
        sig = f"void {name}(const json& j, const std::string& key, {self.cpp(t)}& out)"
        exp = json.dumps(self.expected(t))
        if t in self.types:
            return name  # struct readers are written by struct_reader, declared ahead
        if t == "bool":
            body = f"if (!j.is_boolean()) bad(key, j, {exp});\n  out = j.get<bool>();"
        elif t == "int":
            body = (
                f"if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX))\n"
                f"    bad(key, j, {exp});\n  out = j.get<int64_t>();"
            )
        elif t == "number":
            body = f"if (!j.is_number()) bad(key, j, {exp});\n  out = j.get<double>();"
        elif t == "limit":
            body = f"if (!j.is_number() && !j.is_null()) bad(key, j, {exp});\n  out = j.is_null() ? INFINITY : j.get<double>();"
        elif t == "string":
            body = f"if (!j.is_string()) bad(key, j, {exp});\n  out = j.get<std::string>();"
        elif t.startswith("enum:"):
            enum = t[5:]
            checks = "\n  ".join(f'if (j == "{v}") {{ out = {enum}::{_camel(v)}; return; }}' for v in self.enums[enum])
            body = f"{checks}\n  bad(key, j, {exp});"
        elif t.startswith("list<"):
            item = self.reader(_inner(t))
            body = (
                f"if (!j.is_array()) bad(key, j, {exp});\n  out.assign(j.size(), {{}});\n"
                f'  for (size_t i = 0; i < j.size(); i++) {item}(j[i], key + "[" + std::to_string(i) + "]", out[i]);'
            )
        elif t.startswith("map<"):
            item = self.reader(_inner(t))
            body = (
                f"if (!j.is_object()) bad(key, j, {exp});\n  out.clear();\n"
                f'  for (const auto& [k, v] : j.items()) {item}(v, key + "." + k, out[k]);'
            )
        elif t.startswith("optional<"):
            inner = _inner(t)
            item = self.reader(inner)
            body = f"if (j.is_null()) {{ out.reset(); return; }}\n  out.emplace();\n  {item}(j, key, *out);"
        else:
            sys.exit(f"run_description.json: unknown type '{t}'")
        self.reader_code.append(f"{sig} {{\n  {body}\n}}\n")
        return name

    def struct_reader(self, name: str) -> str:
        fields = self.types[name]["fields"]
        known = ", ".join(fields)
        lines = [
            f"void {self.reader(name)}(const json& j, const std::string& key, {name}& out) {{",
            f"  if (!j.is_object()) bad(key, j, {json.dumps(self.expected(name))});",
            "  for (const auto& [k, v] : j.items())",
            f"    if ({' && '.join(f'k != {json.dumps(f)}' for f in fields)})",
            f"      bad_key(at(key, k), {json.dumps(known)});",
        ]
        for field, spec in fields.items():
            t = spec["type"]
            lines.append(f"  if (auto it = j.find({json.dumps(field)}); it != j.end()) {{")
            lines.append(f"    {self.reader(t)}(*it, at(key, {json.dumps(field)}), out.{field});")
            for bound, op in (("min", "<"), ("above", "<=")):
                if bound in spec:
                    word = ">=" if bound == "min" else ">"
                    lines.append(f"    if (out.{field} {op} {spec[bound]!r})")
                    lines.append(
                        f"      bad(at(key, {json.dumps(field)}), *it, "
                        f"{json.dumps(self.expected(t) + f' {word} {spec[bound]!r}')});"
                    )
            lines.append("  }")
            if "default" not in spec:
                lines.append(f"  else missing(at(key, {json.dumps(field)}), {json.dumps(self.expected(t))});")
        lines.append("}\n")
        return "\n".join(lines)

    def default(self, spec: dict) -> str:
        if "default" not in spec:
            return "{}"
        t, v = spec["type"], spec["default"]
        if v is None and t == "limit":
            return "INFINITY"  # null: no limit
        if v is None or v == [] or v == {}:
            return "{}"
        if t == "bool":
            return "true" if v else "false"
        if t in ("int", "number", "limit"):
            return repr(v)
        if t == "string":
            return json.dumps(v)
        if t.startswith("enum:"):
            return f"{t[5:]}::{_camel(v)}"
        sys.exit(f"run_description.json: a default of type {t} can only be empty")


def _inner(t: str) -> str:
    if "<" not in t or not t.endswith(">"):
        sys.exit(f"run_description.json: unknown type '{t}'")
    return t[t.index("<") + 1 : -1]


def _camel(value: str) -> str:
    return "".join(part.capitalize() for part in value.split("_"))


def _comment(text: str, indent: str = "") -> str:
    return f"{indent}// {text}\n" if text else ""


TRACE_CPP = {"int": ("int64_t", "%lld", "(long long){}"), "number": ("double", "%.17g", "{}")}


def trace_writers(rows: dict[str, dict], doc: str) -> list[str]:
    """One inline writer per trace row kind: write_trace_KIND(FILE*, columns...) writes the row's
    line (its kind, then its columns, tab-separated); strings lose any tab or newline."""
    out = [
        _comment(doc).rstrip("\n"),
        "inline void write_trace_text(FILE* f, const char* text) {",
        "  for (; *text; text++)",
        "    fputc(*text == '\\t' || *text == '\\n' ? ' ' : *text, f);",
        "}",
    ]
    for kind, spec in rows.items():
        params, body = [], [f'  fputs("{kind}", f);']
        for column, t in spec["columns"].items():
            if t == "string":
                params.append(f"const char* {column}")
                body += ["  fputc('\\t', f);", f"  write_trace_text(f, {column});"]
            elif t in TRACE_CPP:
                ctype, fmt, arg = TRACE_CPP[t]
                params.append(f"{ctype} {column}")
                body.append(f'  fprintf(f, "\\t{fmt}", {arg.format(column)});')
            else:
                sys.exit(f"run_description.json: trace_rows.{kind}.{column}: unknown type '{t}'")
        body.append("  fputc('\\n', f);")
        out += [
            _comment(spec.get("doc", "")).rstrip("\n"),
            f"inline void write_trace_{kind}(FILE* f, {', '.join(params)}) {{",
        ]
        out += [*body, "}", ""]
    return out


def header(
    s: Schema, doc: list[str], report_columns: list[str], report_doc: str, trace_rows: dict, trace_doc: str
) -> str:
    out = [
        "// Generated by gen_run_description.py from run_description.json: do not edit.",
        *(f"// {line}" for line in doc),
        "#ifndef ORRERY_RUN_DESCRIPTION_HPP",
        "#define ORRERY_RUN_DESCRIPTION_HPP",
        "",
        "#include <cmath>  // INFINITY: a limit's null",
        "#include <cstdint>",
        "#include <cstdio>",
        "#include <map>",
        "#include <optional>",
        "#include <string>",
        "#include <vector>",
        "",
        "namespace orrery {",
        "",
    ]
    for name, values in s.enums.items():
        out.append(f"enum class {name} {{ {', '.join(_camel(v) for v in values)} }};")
    out.append("")
    for name, spec in s.types.items():
        out.append(_comment(spec.get("doc", "")).rstrip("\n"))
        out.append(f"struct {name} {{")
        for field, f in spec["fields"].items():
            line = f"  {s.cpp(f['type'])} {field} = {s.default(f)};"
            out.append(line + (f"  // {f['doc']}" if "doc" in f else ""))
        out.append("};")
        out.append("")
    out += [
        _comment(report_doc).rstrip("\n"),
        'inline constexpr const char* kReportHeader = "' + "\\t".join(report_columns) + '\\n";',
        "",
        *trace_writers(trace_rows, trace_doc),
    ]
    out += [
        "/* Parses a run description (its JSON text; source names it in errors). Any departure from",
        " * the schema stops the run (fatal): orrery run wrote it, so it is Orrery's error. */",
        f"{s.root} parse_run_description(const std::string& text, const std::string& source);",
        "",
        "}  // namespace orrery",
        "",
        "#endif",
        "",
    ]
    return "\n".join(line for line in out if line is not None)


PREAMBLE = """// Generated by gen_run_description.py from run_description.json: do not edit.
#include "run_description.hpp"

#include "core/fatal.hpp"

// nlohmann/json (Debian's nlohmann-json3-dev, header-only): a well-kept JSON reader with exact
// number parsing, instead of a hand-written one.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>

namespace orrery {
namespace {
using json = nlohmann::json;

const std::string* g_source = nullptr;  // the file being read, for the error line

std::string at(const std::string& key, const std::string& field) { return key.empty() ? field : key + "." + field; }

[[noreturn]] void bad(const std::string& key, const json& value, const std::string& expected) {
  std::string text = value.dump();
  if (text.size() > 80)
    text = text.substr(0, 77) + "...";
  fatal("run description %s: key '%s' has value %s, expected %s", g_source->c_str(), key.c_str(), text.c_str(),
        expected.c_str());
}

[[noreturn]] void missing(const std::string& key, const std::string& expected) {
  fatal("run description %s: key '%s' is missing, expected %s", g_source->c_str(), key.c_str(), expected.c_str());
}

[[noreturn]] void bad_key(const std::string& key, const std::string& known) {
  fatal("run description %s: key '%s' is not one of the schema's (%s)", g_source->c_str(), key.c_str(),
        known.c_str());
}
"""


def source(s: Schema) -> str:
    declarations = [f"void {s.reader(name)}(const json& j, const std::string& key, {name}& out);" for name in s.types]
    structs = [s.struct_reader(name) for name in s.types]
    return "\n".join(
        [
            PREAMBLE,
            *declarations,
            "",
            *s.reader_code,
            *structs,
            "}  // namespace",
            "",
            f"{s.root} parse_run_description(const std::string& text, const std::string& source) {{",
            "  g_source = &source;",
            "  json j = json::parse(text, nullptr, false);",
            "  if (j.is_discarded())",
            '    fatal("run description %s: not valid JSON", source.c_str());',
            f"  {s.root} out;",
            f'  {s.reader(s.root)}(j, "", out);',
            "  return out;",
            "}",
            "",
            "}  // namespace orrery",
            "",
        ]
    )


def _write_expr(s: Schema, t: str, v: str) -> str:
    """C++ expression: the json of value v of type t."""
    if t == "limit":
        return f"(std::isinf({v}) ? json(nullptr) : json({v}))"
    if t in PRIMITIVE_CPP:
        return f"json({v})"
    if t.startswith("enum:"):
        enum = t[5:]
        cases = " : ".join(f'{v} == {enum}::{_camel(x)} ? json("{x}")' for x in s.enums[enum])
        return f"({cases} : json(nullptr))"
    if t in s.types:
        return f"write_{t}({v})"
    inner = _inner(t)
    if t.startswith("list<"):
        return f"[&] {{ json a = json::array(); for (const auto& x : {v}) a.push_back({_write_expr(s, inner, 'x')}); return a; }}()"
    if t.startswith("map<"):
        return f"[&] {{ json o = json::object(); for (const auto& [k, x] : {v}) o[k] = {_write_expr(s, inner, 'x')}; return o; }}()"
    return f"({v} ? {_write_expr(s, inner, '(*' + v + ')')} : json(nullptr))"


def writer(s: Schema) -> str:
    out = [
        "// Generated by gen_run_description.py from run_description.json: do not edit.",
        '#include "run_description.hpp"',
        "",
        "#include <nlohmann/json.hpp>",
        "",
        "#include <cmath>",
        "",
        "namespace orrery {",
        "namespace {",
        "using json = nlohmann::json;",
        "",
    ]
    out += [f"json write_{name}(const {name}& v);" for name in s.types]
    for name, spec in s.types.items():
        out.append(f"json write_{name}(const {name}& v) {{")
        out.append("  json j = json::object();")
        for field, f in spec["fields"].items():
            out.append(f'  j["{field}"] = {_write_expr(s, f["type"], "v." + field)};')
        out += ["  return j;", "}", ""]
    out += [
        "}  // namespace",
        "",
        f"std::string write_run_description(const {s.root}& d) {{ return write_{s.root}(d).dump(1); }}",
        "",
        "}  // namespace orrery",
        "",
    ]
    return "\n".join(out)


def main(schema_path: Path, out: Path) -> None:
    data = json.loads(schema_path.read_text())
    s = Schema(data)
    out.mkdir(parents=True, exist_ok=True)
    (out / "run_description.hpp").write_text(
        header(
            s,
            data["doc"],
            data["report_columns"],
            data["report_columns_doc"],
            data["trace_rows"],
            data["trace_rows_doc"],
        )
    )
    (out / "run_description.cpp").write_text(source(s))
    (out / "run_description_write.cpp").write_text(writer(s))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
