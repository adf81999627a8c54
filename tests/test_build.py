"""The build: what setup.py compiles, and under which rules.

setup.py compiles every module with ``boundscheck=False, wraparound=False`` (right for
the hand-written ``.pyx`` files, which check their indices themselves). A plain Python
module compiled with those directives would read ``xs[-1]`` as a C index of -1: a
segfault, not an IndexError (it happened to ``_stream.py``). Each plain ``.py`` module in
the list must therefore restore Python's index semantics in its header.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = "# cython: boundscheck=True, wraparound=True"


def compiled_modules():
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "CYTHON_MODULES" for t in node.targets):
            return [tuple(ast.literal_eval(elt)) for elt in node.value.elts]
    raise AssertionError("setup.py has no CYTHON_MODULES list")


def test_compiled_python_modules_keep_python_index_semantics():
    modules = compiled_modules()
    plain = [path for _name, path in modules if path.endswith(".py")]
    assert "src/apertus_fast/_stream.py" in plain
    for path in plain:
        first = (ROOT / path).read_text(encoding="utf-8").splitlines()[0]
        assert first == HEADER, f"{path} must start with {HEADER!r}"


def test_every_compiled_module_exists_and_is_named_after_its_file():
    for name, path in compiled_modules():
        assert (ROOT / path).is_file(), path
        assert name == "apertus_fast." + Path(path).stem, (name, path)


def test_the_makefile_stamp_covers_every_compiled_module():
    # `make` reinstalls (recompiles) when the stamp's hash changes: it must read every
    # plain .py module that setup.py compiles, or an edit to one would not be compiled
    stamp = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("STAMP"))
    for _name, path in compiled_modules():
        if path.endswith(".py"):
            assert f"s/'{Path(path).name}'" in stamp, f"Makefile's STAMP does not hash {path}"
