"""Running code in a fresh interpreter, for what one process cannot show: import-time
behaviour, modules not yet loaded, objects crossing a process boundary."""

from __future__ import annotations

import os
import subprocess
import sys


def run_python(code: str, *, cwd=None, input: bytes | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` with ``python -c`` in a new interpreter that imports the same
    apertus_fast as the tests (their ``sys.path`` as ``PYTHONPATH``; ``cwd`` first).
    Fails the test, with the child's stderr, unless it exits 0. Output is text, unless
    ``input`` is bytes (then stdout is bytes too)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    run = subprocess.run([sys.executable, "-c", code], cwd=cwd, input=input, env=env,
                         capture_output=True, text=input is None, timeout=timeout)
    stderr = run.stderr if input is None else run.stderr.decode(errors="replace")
    assert run.returncode == 0, f"the fresh interpreter failed:\n{stderr[-3000:]}"
    return run


def source_module(name: str):
    """``apertus_fast.<name>`` run from its ``.py`` source, as a pure-Python install
    runs it, even where the package imports the compiled module: its module globals
    can be replaced (counted, mutated) and its loops are interpreted."""
    import importlib.util
    from pathlib import Path

    import apertus_fast

    path = Path(apertus_fast.__file__).with_name(f"{name}.py")
    # (inside the package, so that its relative imports resolve)
    spec = importlib.util.spec_from_file_location(f"apertus_fast.{name}_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def default_stop_signals() -> None:
    """A ``preexec_fn`` for a command that a test signals: Ctrl-C, SIGTERM, SIGHUP and
    SIGQUIT at their default disposition, as in a terminal, whatever the test runner
    inherited (under ``nohup`` SIGHUP is ignored, and the command rightly keeps
    ignoring a signal it was started ignoring)."""
    import signal

    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
