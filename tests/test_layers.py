"""The code's shape (CONTRIBUTING.md, "Layers"): imports, module-level and in-function alike, run
one way through the layers, no module imports another that imports it back, and no source file
is longer than 600 lines."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"
PACKAGE = "nsight_doctor"
MAX_LINES = 600

# Lowest first; a module may import its own layer and those below. A name covers its submodules;
# the longest name that matches a module gives its layer ("" is the package itself: the library
# API, analyze()).
LAYERS: list[tuple[str, list[str]]] = [
    ("base", ["errors", "db", "yamlio", "cachedir", "runtime", "redact"]),
    ("ingest", ["ingest"]),
    ("store", ["store"]),
    ("analysis", ["", "model", "sections", "summary", "rules", "rule_tests", "report_data", "engine"]),
    ("analysis", ["analysis_cache", "compare"]),
    ("render", ["render", "reports", "docgen.rules"]),
    ("cli", ["cli", "archive", "docgen", "__main__"]),
]
ORDER = {name: i for i, name in enumerate(dict.fromkeys(n for n, _ in LAYERS))}


def modules() -> dict[str, Path]:
    out = {}
    for f in (SRC / PACKAGE).rglob("*.py"):
        parts = list(f.relative_to(SRC / PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def layer(module: str) -> str:
    best, found = -1, None
    for name, prefixes in LAYERS:
        for p in prefixes:
            if (p == "" or module == p or module.startswith(p + ".")) and len(p) > best:
                best, found = len(p), name
    assert found is not None, f"{module} is in no layer: add it to LAYERS (and to CONTRIBUTING.md)"
    return found


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``module`` imports (relative to the package)."""
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = f"{PACKAGE}.{pkg}".strip(".").split(".")[: -node.level + 1 or None]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            if t != PACKAGE and not t.startswith(PACKAGE + "."):
                continue
            rel = t.removeprefix(PACKAGE).removeprefix(".")
            while rel and rel not in known:
                rel = rel.rpartition(".")[0]
            # The package itself (__version__; its analyze() is imported on first use) is below all.
            if rel and rel != module and not module.startswith(rel + "."):
                out.add(rel)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, f, set(mods)) for m, f in mods.items()}


def test_imports_run_down_the_layers():
    upward = [
        f"{m} ({layer(m)}) imports {d} ({layer(d)})"
        for m, deps in graph().items()
        for d in sorted(deps)
        if ORDER[layer(d)] > ORDER[layer(m)]
    ]
    assert upward == []


def test_no_import_circle():
    g = graph()
    circles = []
    for start in g:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for d in g.get(node, ()):
                if d == start:
                    circles.append(" -> ".join([*path, d]))
                elif d not in seen:
                    seen.add(d)
                    stack.append((d, [*path, d]))
    assert circles == []


def test_no_source_file_is_too_long():
    long = {
        str(f.relative_to(SRC)): n
        for f in (SRC / PACKAGE).rglob("*.py")
        if (n := len(f.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
