"""The rendering oracle: the official chat templates rendered by jinja2 in the
environment each dialect's real users render it in (see ../shared/oracle/README.md).

* ``apertus-format-reference``: ``jinja2.Template(text)`` exactly as the reference
  package's ``ApertusFormatter`` does (default ``Environment``; its ``|tojson`` is jinja2's
  built-in filter, because the package passes ``tojson`` as a variable, not a filter).
* ``apertus-1`` / ``apertus-1.5``: Hugging Face ``apply_chat_template``'s
  ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
  extensions=[loopcontrols])`` with its ``tojson`` filter and ``raise_exception`` /
  ``strftime_now`` globals.

The templates are looked up in ``$APERTUS_ORACLE_DIR`` or ``<repo>/../shared/oracle/templates``.
``ORACLE_MISSING`` is the reason to print when they are absent (a user's clone); tests then
skip and the committed golden files keep the suite meaningful.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEMPLATES = Path(os.environ.get("APERTUS_ORACLE_DIR") or REPO.parent / "shared" / "oracle" / "templates")
DIALECT_FILES = {
    "apertus-format-reference": "apertus-format-reference.jinja",
    "apertus-1": "apertus-1.jinja",
    "apertus-1.5": "apertus-1.5.jinja",
}


def _missing_reason() -> str | None:
    try:
        import jinja2  # noqa: F401
    except ImportError:
        return "jinja2 is not installed (pip install -e '.[test]')"
    absent = [f for f in DIALECT_FILES.values() if not (TEMPLATES / f).is_file()]
    if absent:
        return f"official templates not found in {TEMPLATES} (set APERTUS_ORACLE_DIR): {', '.join(absent)}"
    return None


#: ``None`` when the oracle is usable, else why not.
ORACLE_MISSING = _missing_reason()


class OracleError(Exception):
    """The template rejected the input (raise_exception, or a failure inside jinja2)."""


def _raise_exception(message):
    import jinja2

    raise jinja2.TemplateError(message)


def hf_tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    """Hugging Face's ``tojson`` filter."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@lru_cache(maxsize=None)
def template_source(dialect: str) -> str:
    return (TEMPLATES / DIALECT_FILES[dialect]).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def compiled(dialect: str):
    """The compiled jinja2 template of ``dialect`` in its real environment."""
    import jinja2
    import jinja2.ext
    import jinja2.sandbox

    src = template_source(dialect)
    if dialect == "apertus-format-reference":
        return jinja2.Template(src)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = hf_tojson
    env.globals["raise_exception"] = _raise_exception
    return env.from_string(src)


def oracle_render(
    messages,
    *,
    dialect="apertus-format-reference",
    tools=None,
    enable_thinking=False,
    add_generation_prompt=False,
    continue_assistant_message=False,
    date="2026-01-01",
    bos_token="<s>",
):
    """Render with the official template; raise :class:`OracleError` where it fails.

    ``date`` fixes ``strftime_now`` (a ``datetime.date`` or ``"YYYY-MM-DD"``), with
    the year in four digits as apertus-fast's ``date`` has it (glibc's ``%Y`` writes
    ``999`` for the year 999; the real callers' dates are today's).
    """
    if isinstance(date, str):
        date = _dt.date.fromisoformat(date)
    fixed = _dt.datetime(date.year, date.month, date.day, 12, 0, 0)

    def strftime_now(fmt):
        return fixed.strftime(fmt.replace("%Y", f"{fixed.year:04d}"))

    variables = dict(
        bos_token=bos_token,
        messages=messages,
        tools=tools,
        enable_thinking=enable_thinking,
        add_generation_prompt=add_generation_prompt,
        raise_exception=_raise_exception,
        strftime_now=strftime_now,
    )
    if dialect == "apertus-format-reference":
        # What the reference package passes (tojson as a plain variable, unused by
        # the template's |tojson filter); it passes no continue_assistant_message.
        variables["tojson"] = hf_tojson
        if tools is None:
            variables["tools"] = []
    else:
        variables["continue_assistant_message"] = continue_assistant_message
    try:
        return compiled(dialect).render(**variables)
    except RecursionError:
        raise
    except Exception as exc:  # TemplateError, UndefinedError, TypeError, ... from the template
        raise OracleError(f"{type(exc).__name__}: {exc}") from exc
