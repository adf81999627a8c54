"""Build script: compiles the Cython core when a C compiler and Cython are available.

Set ``APERTUS_FAST_PURE=1`` to build a pure-Python install (no extension modules);
the package then runs on its pure-Python twins and reports ``apertus_fast.BACKEND == "python"``.
A failed compilation is not fatal either (the extensions are optional).
"""

import os
import sys

from setuptools import setup

# Modules compiled when possible. ``_lexer.pyx`` is hand-written Cython; the other
# entries are plain Python modules that Cython compiles as they are (their .py source
# ships too and is what runs without a compiler).
CYTHON_MODULES = [
    ("apertus_fast._lexer", "src/apertus_fast/_lexer.pyx"),
    ("apertus_fast._render", "src/apertus_fast/_render.py"),
    ("apertus_fast._render_fast", "src/apertus_fast/_render_fast.pyx"),
    ("apertus_fast._parse", "src/apertus_fast/_parse.py"),
    ("apertus_fast._stream", "src/apertus_fast/_stream.py"),
    ("apertus_fast._jsonl", "src/apertus_fast/_jsonl.pyx"),
    ("apertus_fast._mask", "src/apertus_fast/_mask.py"),
]


def _extensions():
    if os.environ.get("APERTUS_FAST_PURE", "").strip() not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        # `pip install .` brings Cython itself (pyproject.toml's build requirements); a
        # direct `python setup.py build_ext` does not, and would otherwise do nothing.
        sys.stderr.write("apertus-fast: Cython is not installed, so nothing is compiled; the "
                         "package runs on its pure-Python twins (pip install cython, or "
                         "pip install -e .)\n")
        return []
    from setuptools import Extension

    present = [(name, path) for name, path in CYTHON_MODULES if os.path.exists(path)]
    for name, path in CYTHON_MODULES:
        if (name, path) not in present:
            # a source tree without it (an sdist that left it out): say so, since the
            # module then runs on its pure-Python twin, much more slowly
            sys.stderr.write(f"apertus-fast: {path} is missing, so {name} is not compiled\n")
    exts = [Extension(name, [path]) for name, path in present]
    built = cythonize(
        exts,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "infer_types": True,
        },
        quiet=True,
    )
    # optional: a module that fails to compile (no C compiler, no Python headers) is
    # left out with a warning, and runs on its pure-Python twin. (Set here, on what
    # cythonize returns: it makes new Extension objects, without the flag.)
    for ext in built:
        ext.optional = True
    return built


setup(ext_modules=_extensions())
