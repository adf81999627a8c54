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

import pytest

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
        assert first.startswith(HEADER), f"{path} must start with {HEADER!r}"


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


def test_the_sdist_holds_what_the_build_compiles(tmp_path):
    # An install from the sdist compiles what the sdist holds: without the .pyx files
    # and the .pxd declarations it silently ran the pure-Python twins (MANIFEST.in)
    import shutil
    import subprocess
    import sys
    import tarfile

    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "out", "corpus", ".hypothesis", ".benchmarks", ".pytest_cache",
        "__pycache__", "*.egg-info", "*.so", "*.c", "*.html", "crash-*"))
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    env["APERTUS_FAST_PURE"] = "1"  # no cythonize: the sdist is only the files
    run = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")],
                         cwd=tree, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (archive,) = (tmp_path / "dist").glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    for _name, path in compiled_modules():
        assert path in names, f"the sdist lacks {path}"
        pxd = str(Path(path).with_suffix(".pxd"))
        if (ROOT / pxd).is_file():
            assert pxd in names, f"the sdist lacks {pxd}"
    for needed in ("samples/conversations.jsonl", "samples/rendered-apertus-1.5.txt", "Makefile",
                   "README.md", "tests/test_build.py", "src/apertus_fast/py.typed"):
        assert needed in names, f"the sdist lacks {needed}"
    assert not [n for n in names if n.endswith((".c", ".so"))]
    # every file of the repository (where this is a git checkout), not only those named
    # above: the sdist once lacked a sample that six tests read
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        missing = [p for p in listed.stdout.splitlines() if p not in names and p != ".gitignore"]
        assert not missing, f"the sdist lacks {missing}"


def test_a_module_that_fails_to_compile_is_left_out_not_fatal(tmp_path):
    """setup.py marks every extension optional: with a C compiler that fails (none
    installed, or no Python headers) the build still succeeds, and the package runs on
    its pure-Python twins. cythonize makes new Extension objects, and used to drop the
    flag, so `pip install .` without a compiler failed."""
    import shutil
    import subprocess
    import sys

    pytest = __import__("pytest")
    pytest.importorskip("Cython")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "out", "corpus", ".hypothesis", ".benchmarks", ".pytest_cache",
        "__pycache__", "*.egg-info", "*.so", "*.html", "crash-*"))  # (Cython's .c kept: faster)
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("PYTHONPATH", "APERTUS_FAST_PURE")}
    env["CC"] = env["LDSHARED"] = "false"  # a compiler that always fails
    run = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "building optional extension" in run.stderr.lower() or "failed" in run.stderr.lower(), run.stderr[-2000:]
    assert not list((tree / "src" / "apertus_fast").glob("*.so"))


def test_a_failed_compile_leaves_no_older_build_of_the_module_behind(tmp_path):
    """An edited module whose compile fails must run from its edited source. Its
    compiled build from before stayed (in ``src/`` for an editable install, in the
    build directory for a wheel) and was imported instead: the edit ignored, the
    package reported as compiled (packaging audit)."""
    import os
    import shutil
    import subprocess
    import sys
    import sysconfig

    pytest = __import__("pytest")
    pytest.importorskip("Cython")
    built = sorted((ROOT / "src" / "apertus_fast").glob("_parse.*.so"))
    if not built:
        pytest.skip("no compiled _parse in this tree (a pure-Python install)")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(   # (.so and .c kept, with their times)
        ".git", ".venv", "build", "dist", "out", "corpus", ".hypothesis", ".benchmarks", ".pytest_cache",
        "__pycache__", "*.egg-info", "*.html", "crash-*"))
    # an older build in the build directory too, where a wheel is made from
    lib = tree / "build" / f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}" / "apertus_fast"
    lib.mkdir(parents=True)
    shutil.copy2(built[0], lib / built[0].name)
    lexer_c = tree / "src/apertus_fast/_lexer.c"
    lexer_c_time = lexer_c.stat().st_mtime if lexer_c.exists() else None
    with open(tree / "src" / "apertus_fast" / "_parse.py", "a", encoding="utf-8") as f:
        f.write("\nEDITED = True\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "APERTUS_FAST_PURE")}
    env["CC"] = env["LDSHARED"] = "false"  # a compiler that always fails
    for args in (["build_ext"], ["build_ext", "--inplace"]):
        run = subprocess.run([sys.executable, "setup.py", *args], cwd=tree, env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "not compiled" in run.stderr and "apertus_fast._parse" in run.stderr, run.stderr[-2000:]
    assert not list(tree.glob("build/**/_parse.*.so")), "the build directory kept the old build"
    assert not list((tree / "src" / "apertus_fast").glob("_parse.*.so")), "src/ kept the old build"
    # a module whose sources did not change keeps its build (where cythonize did not
    # write its C again, as it does in a fresh clone whose first build ran in pip's
    # isolated environment: a C newer than the build makes the build stale)
    lexer_so = sorted((ROOT / "src/apertus_fast").glob("_lexer.*.so"))
    if (lexer_c_time is not None and lexer_c.stat().st_mtime == lexer_c_time and lexer_so
            and lexer_so[0].stat().st_mtime >= lexer_c_time):
        assert list((tree / "src" / "apertus_fast").glob("_lexer.*.so")), "an up-to-date build was removed"
    check = subprocess.run(
        [sys.executable, "-c", "import apertus_fast as a, apertus_fast._parse as p;"
                               "print(p.EDITED, a.backends()['_parse'])"],
        cwd=tmp_path, env=dict(env, PYTHONPATH=str(tree / "src")), capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.split() == ["True", "python"], check.stdout


def test_type_checkers_see_every_public_name_and_the_render_signatures():
    """The package ships py.typed, but loads its names on first use (module
    __getattr__), which a type checker cannot follow: every name would be Any. The
    TYPE_CHECKING block of __init__.py re-exports each one explicitly (``X as X``), and
    render / render_with_spans carry annotations in their source."""
    init = ast.parse((ROOT / "src/apertus_fast/__init__.py").read_text())
    exports = next(ast.literal_eval(node.value) for node in init.body
                   if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_EXPORTS")
    block = next(node for node in init.body if isinstance(node, ast.If)
                 and getattr(node.test, "id", "") == "TYPE_CHECKING")
    reexported = {}
    for node in block.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name} is not re-exported as itself"
                reexported[alias.name] = node.module
    assert {k: v for k, v in reexported.items() if v} == exports
    # the module __getattr__ that loads them is hidden from type checkers: seen, it
    # makes any misspelt name (apertus_fast.rendr) an Any that they accept
    assert not any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                   for node in init.body)
    for public in ("formatter", "models", "enums"):   # (formatter's had one in sight)
        body = ast.parse((ROOT / f"src/apertus_fast/{public}.py").read_text()).body
        assert not any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                       for node in body), f"apertus_fast.{public} shows type checkers a __getattr__"
    hidden = [node for node in init.body if isinstance(node, ast.If)
              and ast.unparse(node.test) == "not TYPE_CHECKING"]
    assert any(isinstance(inner, ast.FunctionDef) and inner.name == "__getattr__"
               for node in hidden for inner in node.body)
    install = next(node for node in init.body if isinstance(node, ast.FunctionDef)
                   and node.name == "install_as_apertus_format")
    assert install.returns is not None
    assert {k for k, v in reexported.items() if v is None} == {"enums", "formatter", "models"}
    for path, name in (("src/apertus_fast/_render.py", "render"),
                       ("src/apertus_fast/_spans.py", "render_with_spans")):
        fn = next(node for node in ast.parse((ROOT / path).read_text()).body
                  if isinstance(node, ast.FunctionDef) and node.name == name)
        args = fn.args.args + fn.args.kwonlyargs
        assert args and all(a.annotation is not None for a in args), name
        assert fn.returns is not None, name


def _public_callables():
    import inspect

    import apertus_fast

    for name in sorted(apertus_fast.__all__):
        obj = getattr(apertus_fast, name)
        if inspect.isclass(obj):
            yield name, obj
            for attr, value in vars(obj).items():
                if attr.startswith("_") and attr != "__init__":
                    continue
                if isinstance(value, (classmethod, staticmethod)):
                    value = value.__func__
                elif isinstance(value, property):
                    value = value.fget
                if callable(value):
                    yield f"{name}.{attr}", value
        elif callable(obj) and not inspect.ismodule(obj):
            yield name, obj


def test_annotations_resolve_at_run_time():
    """``typing.get_type_hints`` (and ``inspect.signature(eval_str=True)``) of every
    public function, class and method: what jsonargparse, FastAPI's Depends and
    pydantic's validate_call read. Names imported for type checkers only left them
    unresolvable (NameError: name '_dt' is not defined, for ApertusFormatter; audit),
    and the compiled render had its annotations as strings in a module without the
    names."""
    import inspect
    import typing

    import apertus_fast

    checked = 0
    for name, obj in _public_callables():
        typing.get_type_hints(obj)
        checked += 1
    assert checked > 100
    assert typing.get_type_hints(apertus_fast.ApertusFormatter.__init__)["enable_thinking"] is bool
    # (return types written as the reference writes them: no string inside the string)
    assert str(inspect.signature(apertus_fast.Message.user)) == "(text: 'str') -> 'Message'"
    for fn in (apertus_fast.render, apertus_fast.render_with_spans, apertus_fast.parse):
        signature = inspect.signature(fn, eval_str=True)
        assert signature.parameters["dialect"].annotation == str | apertus_fast.Dialect
        assert not any(isinstance(p.annotation, str) for p in signature.parameters.values())


def test_backends_tell_a_compiled_module_that_does_not_load(tmp_path):
    """``_lexer``, ``_render_fast`` and ``_jsonl`` are done without where they do not
    load (a stale build, one for another Python): the twin, the general renderer and
    the json module run. ``backends()`` looked only at which file an import would
    load, so it said "cython" for them while the Python code ran (audit)."""
    import shutil

    import apertus_fast

    from .fresh import run_python

    package = Path(apertus_fast.__file__).parent
    compiled = {name: next(package.glob(f"{name}.*.so"), None)
                for name in ("_lexer", "_render_fast", "_jsonl")}
    if None in compiled.values():
        pytest.skip("the compiled build is not installed")
    copy = tmp_path / "apertus_fast"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for path in compiled.values():
        (copy / path.name).write_bytes(b"not a shared object")
    run = run_python(
        "import sys; sys.path.insert(0, %r)\n"
        "import apertus_fast as a, apertus_fast._lex as lx, apertus_fast._render as r\n"
        "assert a.__file__.startswith(%r), a.__file__\n"
        "b = a.backends()\n"
        "print(b['_lexer'], b['_render_fast'], b['_jsonl'], b['_parse'], a.BACKEND,\n"
        "      lx.LEXER_BACKEND, r._FAST is None)\n"
        "assert a.parse(a.render([{'role': 'user', 'content': 'hi'}])).messages\n"
        % (str(tmp_path), str(tmp_path)))
    assert run.stdout.split() == ["python", "python", "python", "cython", "mixed", "python", "True"]


def test_the_version_is_the_same_in_pyproject_and_the_package():
    """The version is written twice (pyproject.toml's metadata, ``__version__``, which
    ``apertus-fast --version`` prints): a release must bump both."""
    import re

    import apertus_fast

    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'(?m)^version\s*=\s*"([^"]+)"', project).group(1)
    assert apertus_fast.__version__ == declared
