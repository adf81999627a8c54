"""Golden files: apertus-fast against committed renderings of the official templates.

``tests/golden/<case>.json`` is the input; ``<case>.<dialect>.txt`` the exact expected
text, or ``<case>.<dialect>.error.txt`` when the template rejects the input (first line:
``message_index: N`` or ``none``). Regenerate with ``python -m tests.make_golden``.

These tests need no oracle, so they keep a clone without the templates meaningful;
with the oracle present, ``test_golden_is_current`` also checks that the committed
files are still what the templates render.
"""

from __future__ import annotations

import json

import pytest

from tests.make_golden import (CASES, DIALECTS, GOLDEN, case_document, case_inputs,
                               expected_files, oracle_expect, parse_error_file)
from tests.oracle import ORACLE_MISSING

from apertus_fast import RenderError, render

NAMES = sorted(p.name[: -len(".json")] for p in GOLDEN.glob("*.json"))
PAIRS = [pytest.param(n, d, id=f"{n}[{d}]") for n in NAMES for d in DIALECTS]


def load(name):
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def test_golden_files_are_complete():
    assert len(NAMES) >= 40
    assert sorted(CASES) == NAMES, "run python -m tests.make_golden"
    for name in NAMES:
        for dialect in DIALECTS:
            ok, err = expected_files(name, dialect)
            assert ok.is_file() != err.is_file(), (name, dialect)
    known = {f"{n}.json" for n in NAMES} | {
        p.name for n in NAMES for d in DIALECTS for p in expected_files(n, d)}
    assert {p.name for p in GOLDEN.iterdir()} <= known, "stray files in tests/golden/"


@pytest.mark.parametrize("name, dialect", PAIRS)
def test_golden(name, dialect):
    messages, tools, flags = case_inputs(load(name))
    ok, err = expected_files(name, dialect)
    if ok.is_file():
        expected = ok.read_bytes().decode("utf-8")
        assert render(messages, dialect=dialect, tools=tools, **flags) == expected
    else:
        index = parse_error_file(err.read_text(encoding="utf-8"))
        with pytest.raises(RenderError) as info:
            render(messages, dialect=dialect, tools=tools, **flags)
        assert info.value.message_index == index, str(info.value)
        if index is not None:
            assert f"message {index}" in str(info.value)


@pytest.mark.oracle
@pytest.mark.skipif(bool(ORACLE_MISSING), reason=ORACLE_MISSING or "")
@pytest.mark.parametrize("name, dialect", PAIRS)
def test_golden_is_current(name, dialect):
    """The committed files are what the official templates say (else regenerate)."""
    case = load(name)
    assert case == json.loads(json.dumps(case_document(name))), (
        "the JSON input differs from tests/make_golden.py: run python -m tests.make_golden")
    messages, tools, flags = case_inputs(case)
    exp = oracle_expect(messages, dialect=dialect, tools=tools, **flags)
    ok, err = expected_files(name, dialect)
    if exp.error is None:
        assert ok.is_file() and ok.read_bytes() == exp.text.encode("utf-8")
    else:  # (the template's error text varies with the jinja2 / Python version)
        assert err.is_file(), f"the template now fails: {exp.error}"
        assert parse_error_file(err.read_text(encoding="utf-8")) == exp.message_index


# Inputs a JSON golden file cannot hold, with the template's output written out.

@pytest.mark.parametrize("dialect", DIALECTS)
def test_markup_names_and_system_text_are_escaped_by_plus(dialect):
    """The three places where ``+`` meets a literal that escaping changes, with the
    template's output written out (test_render_oracle.py draws
    Markup into realistic inputs and compares with the template)."""
    from markupsafe import Markup

    user = {"role": "user", "content": "q"}
    block = [user, {"role": "assistant", "content": {"blocks": [
        {"type": "tool_calls", "calls": [{"name": Markup("f"), "arguments": "{}"}]}]}}]
    legacy = [user, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": Markup("{}")}}]}]
    system = [{"role": "system", "content": {"text": Markup("x")}}, user]
    calls = "<|tools_prefix|>[{&#34;f&#34;: {}}]<|tools_suffix|>"
    assert calls in render(block, dialect=dialect, date="2026-01-01")
    assert calls in render(legacy, dialect=dialect, date="2026-01-01")
    assert render(system, dialect=dialect, date="2026-01-01").startswith(
        "<s>&lt;|system_start|&gt;x&lt;|system_end|&gt;<|developer_start|>")


