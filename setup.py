"""Build script: compiles the Cython core when a C compiler and Cython are available.

Set ``APERTUS_FAST_PURE=1`` to build a pure-Python install (no extension modules);
the package then runs on its pure-Python twins and reports ``apertus_fast.BACKEND == "python"``.
A failed compilation is not fatal either (the extensions are optional).
"""

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext as _build_ext

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


class build_ext(_build_ext):
    """setuptools' build_ext, which removes a module's previous build before it compiles
    the module again, and says which modules it could not compile.

    Every extension is optional: one that fails to compile is left out, and its
    pure-Python twin runs. But a compiled module left from an earlier build (in the
    build directory, which a wheel is made from, or in ``src/`` for an editable
    install) would stay, and be imported instead of the source it no longer matches:
    an edit, then a failed compile, and the old code ran on, reported as compiled."""

    def run(self):
        self._in_place = bool(self.inplace)   # (setuptools clears it while it builds)
        super().run()
        missing = [ext.name for ext in self.extensions
                   if not os.path.exists(self.get_ext_fullpath(ext.name))]
        if missing:
            sys.stderr.write("apertus-fast: not compiled, so running on their pure-Python "
                             f"twins (much slower): {', '.join(missing)}\n")

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        builds = [target]
        if getattr(self, "_in_place", False):
            build_py = self.get_finalized_command("build_py")
            package, _, _ = self.get_ext_fullname(ext.name).rpartition(".")
            builds.append(os.path.join(build_py.get_package_dir(package), os.path.basename(target)))
        newest = max((os.path.getmtime(s) for s in [*ext.sources, *(ext.depends or [])]
                      if os.path.exists(s)), default=0.0)
        for path in builds:   # a build older than its sources is not kept
            if os.path.exists(path) and os.path.getmtime(path) < newest:
                os.remove(path)
        super().build_extension(ext)


setup(ext_modules=_extensions(), cmdclass={"build_ext": build_ext})
