"""The TypeScript tool signatures (``render_tools`` / ``render_typescript_type`` macros)
against the official templates, in both whitespace environments: the reference
dialect (plain ``jinja2.Template``: no ``trim_blocks``/``lstrip_blocks``) and the
Hugging Face dialects (``trim_blocks`` + ``lstrip_blocks``); they differ around
``oneOf`` variants with descriptions or defaults. The reference dialect also uses
jinja2's own ``tojson`` (sorted keys, ASCII, HTML-safe escapes), the others Hugging
Face's (``json.dumps(ensure_ascii=False)``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import strategies as S
from tests.make_golden import oracle_expect
from tests.oracle import ORACLE_MISSING

if ORACLE_MISSING:
    pytest.skip(ORACLE_MISSING, allow_module_level=True)

from apertus_fast import RenderError, parse, render, render_tools  # noqa: E402

pytestmark = pytest.mark.oracle

EXAMPLES = int(os.environ.get("APERTUS_ORACLE_EXAMPLES", "500"))
DIALECTS = S.DIALECTS
DATE = "2026-01-01"

_UNSORTED = {"z": 1, "a": [None, True], "é": "<&'>", "m": {"y": 2, "b": 1.5}}

#: name -> one parameter schema, covering every branch of render_typescript_type and
#: of the default handling in render_tools.
SCHEMAS = {
    # arrays
    "array-of-string": {"type": "array", "items": {"type": "string"}},
    "array-of-number": {"type": "array", "items": {"type": "number"}},
    "array-of-integer": {"type": "array", "items": {"type": "integer"}},
    "array-of-boolean": {"type": "array", "items": {"type": "boolean"}},
    "array-of-small-object": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "number"}}}},
    "array-of-large-object": {"type": "array", "items": {"type": "object", "properties": {
        "first": {"type": "string"}, "second": {"type": "integer"}, "third": {"type": "boolean"}}}},
    "array-of-object-object": {"type": "array", "items": {"type": ["object", "object"]}},
    "array-of-type-list": {"type": "array", "items": {"type": ["string", "null"]}},
    "array-of-array": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
    "array-of-enum": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
    "array-of-oneof": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
    "array-without-items": {"type": "array"},
    "array-without-items-nullable": {"type": "array", "nullable": True},
    "array-empty-items": {"type": "array", "items": {}},
    "array-null-items-nullable": {"type": "array", "items": None, "nullable": True},
    "array-nullable": {"type": "array", "items": {"type": "string"}, "nullable": True},
    "array-nested-nullable": {"type": "array", "items": {"type": "object"}, "nullable": 1},
    "array-tuple-items": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]},
    "array-items-string": {"type": "array", "items": "string"},
    "array-items-untyped": {"type": "array", "items": {"description": "anything"}},
    # the `inner_type|length > 50` boundary: 29 characters + the property name (code points)
    "array-inner-length-50": {"type": "array", "items": {"type": "object", "properties": {"n" * 21: {"type": "number"}}}},
    "array-inner-length-51": {"type": "array", "items": {"type": "object", "properties": {"n" * 22: {"type": "number"}}}},
    "array-inner-length-50-astral": {"type": "array", "items": {"type": "object", "properties": {
        "😀" * 21: {"type": "number"}}}},
    "array-inner-length-51-astral": {"type": "array", "items": {"type": "object", "properties": {
        "😀" * 22: {"type": "number"}}}},
    "array-of-oneof-with-description": {"type": "array", "items": {"oneOf": [
        {"type": "string", "description": "s"}, {"type": "integer", "default": 1}]}},
    "array-of-non-dict-properties": {"type": "array", "items": {"type": "object", "properties": {
        "a": "string", "b": 5, "c": None, "d": ["x"]}}},
    # type lists
    "type-list": {"type": ["string", "null"]},
    "type-list-single": {"type": ["integer"]},
    "type-list-empty": {"type": []},
    "type-list-odd": {"type": [1, None, "x"]},
    "type-list-object-object": {"type": ["object", "object"]},
    "type-list-containers": {"type": [{"a": "é"}, ["x", 1], 1.5, True]},
    "type-list-single-dict": {"type": [{"a": "b"}]},
    "type-list-unicode": {"type": ["strïng", "😀"]},
    "type-list-with-array": {"type": ["array", "null"], "items": {"type": "string"}},
    # oneOf
    "oneof": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    "oneof-descriptions": {"oneOf": [{"type": "string", "description": "a name"},
                                     {"type": "integer", "description": "an id"}]},
    "oneof-defaults": {"oneOf": [{"type": "string", "default": "<x & 'y'>"},
                                 {"type": "object", "default": _UNSORTED},
                                 {"type": "number", "default": 1e-7}]},
    "oneof-description-and-default-last": {"oneOf": [{"type": "boolean"},
                                                     {"type": "string", "description": "d", "default": "ü"}]},
    "oneof-object-variants": {"oneOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                                        {"type": "object"}]},
    "oneof-single": {"oneOf": [{"type": "object", "description": "only"}]},
    "oneof-nested": {"oneOf": [{"oneOf": [{"type": "string"}, {"type": "null"}]}, {"type": "array"}]},
    "oneof-empty": {"oneOf": [], "type": "string"},
    "oneof-string": {"oneOf": "ab"},
    "oneof-dict": {"oneOf": {"x": 1}},
    "oneof-param-default": {"oneOf": [{"type": "string"}], "default": "fallback"},
    "oneof-with-type": {"type": "string", "oneOf": [{"type": "number"}]},
    # strings
    "string": {"type": "string"},
    "string-nullable": {"type": "string", "nullable": True},
    "string-enum": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "string-enum-default": {"type": "string", "enum": ["a", "<b>"], "default": "<b>"},
    "string-enum-ints": {"type": "string", "enum": [1, 2, None]},
    "string-enum-empty": {"type": "string", "enum": [], "nullable": True},
    "string-enum-string": {"type": "string", "enum": "abc"},
    "string-enum-nullable": {"type": "string", "enum": ["a"], "nullable": True},
    # scalars
    "number": {"type": "number"},
    "integer-enum": {"type": "integer", "enum": [1, 2]},
    "boolean": {"type": "boolean", "nullable": True},
    "null-type": {"type": "null"},
    "untyped": {},
    "description-only": {"description": "free-form"},
    "capitalised-type": {"type": "String"},
    # objects
    "object": {"type": "object"},
    "object-empty-properties": {"type": "object", "properties": {}},
    "object-nested": {"type": "object", "properties": {
        "a": {"type": "string"}, "b": {"type": "object", "properties": {"c": {"type": "array"}}}},
        "required": ["a"]},
    "object-required-string": {"type": "object", "properties": {"ab": {}, "b": {}, "c": {}}, "required": "abx"},
    "object-required-null": {"type": "object", "properties": {"a": {}}, "required": None},
    "object-dict-method-names": {"type": "object", "properties": {
        "items": {"type": "string"}, "keys": {"type": "array"}, "get": {}, "values": {"type": "object"}}},
    # defaults (render_tools)
    "default-string": {"type": "string", "default": "Grüezi <&> 'q' \"dq\" \\ 😀\n"},
    "default-int": {"type": "integer", "default": -3},
    "default-float": {"type": "number", "default": 0.1},
    "default-big": {"type": "number", "default": 10**30},
    "default-bool": {"type": "boolean", "default": False},
    "default-null": {"type": "string", "default": None},
    "default-list": {"type": "array", "default": ["<", 1, None, {"b": 1, "a": 2}]},
    "default-dict": {"type": "object", "default": _UNSORTED},
    "default-with-nullable": {"type": "string", "nullable": True, "default": ""},
    "default-with-description": {"type": "integer", "description": "how many", "default": 0},
    "default-untyped": {"default": "x"},
    "default-unicode-separators": {"type": "string", "default": "\u2028\u2029\x00\x1f\x7f\ud800 é"},
    "default-floats": {"type": "array", "default": [1e16, 1e-7, -0.0, 5e-324, 1.7976931348623157e308, 2**64]},
    "default-nested-keys": {"type": "object", "default": {"b": {"d": 1, "c": [{"z": 0, "y": None}]}, "A": "<"}},
    # descriptions
    "description": {"type": "string", "description": "A <b>bold</b> 'claim' & more\nsecond line"},
    "description-empty": {"type": "string", "description": ""},
}


def _tool(schema, required=()):
    return {"name": "f", "description": "Test tool",
            "parameters": {"type": "object", "properties": {"p": schema, "q": {"type": "string"}},
                           "required": list(required)}}


def check_tools(dialect, tools, messages=()):
    messages = list(messages)
    exp = oracle_expect(messages, dialect=dialect, tools=tools, date=DATE)
    try:
        got = render(messages, dialect=dialect, tools=tools, date=DATE)
    except RenderError as exc:
        assert exp.error is not None, f"ours raised {exc}; the template renders:\n{exp.text}"
        assert exc.message_index == exp.message_index
        return
    assert exp.error is None, f"the template fails ({exp.error}); ours renders:\n{got}"
    assert got == exp.text
    # the section rendered once and passed as tools_text renders the same text
    section = render_tools(tools, dialect)
    assert render(messages, dialect=dialect, tools_text=section, date=DATE) == got


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("tools", [None, [], ()], ids=repr)
def test_no_tools(tools, dialect):
    """No tool: the template writes "Tool Capabilities: disabled", which no string
    after "Tool Capabilities:\\n" gives, so render_tools says None, as parse does."""
    check_tools(dialect, tools)
    assert render_tools(tools, dialect) is None
    text = render([], dialect=dialect, tools=tools, date=DATE)
    assert "Tool Capabilities: disabled" in text
    assert parse(text, dialect=dialect).tools_text is None


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema(name, dialect):
    check_tools(dialect, [_tool(SCHEMAS[name])])
    check_tools(dialect, [_tool(SCHEMAS[name], required=["p"])])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_nested(name, dialect):
    """The same schema one level down (inside an object, an array, a oneOf)."""
    check_tools(dialect, [_tool({"type": "object", "properties": {"x": SCHEMAS[name]}})])
    check_tools(dialect, [_tool({"type": "array", "items": SCHEMAS[name]})])
    check_tools(dialect, [_tool({"oneOf": [SCHEMAS[name], {"type": "string", "description": "d"}]})])


TOOL_LISTS = {
    "no-parameters": [{"name": "now", "description": "Current time"}],
    "parameters-null": [{"name": "f", "description": "d", "parameters": None}],
    "parameters-empty": [{"name": "f", "description": "d", "parameters": {}}],
    "parameters-without-properties": [{"name": "f", "description": "d", "parameters": {"type": "object"}}],
    "parameters-empty-properties": [{"name": "f", "description": "d",
                                     "parameters": {"type": "object", "properties": {}}}],
    "parameters-list": [{"name": "f", "description": "d", "parameters": [1]}],
    "required-missing": [{"name": "f", "description": "d", "parameters": {"properties": {"a": {}, "b": {}}}}],
    "required-string": [{"name": "f", "description": "d",
                         "parameters": {"properties": {"a": {}, "bc": {}}, "required": "abc"}}],
    "required-dict": [{"name": "f", "description": "d",
                       "parameters": {"properties": {"a": {}, "b": {}}, "required": {"a": 1}}}],
    "empty-description": [{"name": "f", "description": ""}],
    "unicode-names": [{"name": "名前_🐍", "description": "Ünïcödé <&>", "parameters": {
        "properties": {"naïve": {"type": "string"}, "with space": {}, "": {}}}}],
    "several-tools": [{"name": "a", "description": "A"}, {"name": "b", "description": "B",
                      "parameters": {"properties": {"x": {"type": "number"}}}}, {"name": "c", "description": "C"}],
    "openai-shaped": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}],
    "openai-and-flat": [{"type": "function", "function": {"name": "f", "description": "d"}},
                        {"name": "g", "description": "e"}],
    "function-without-type": [{"function": {"name": "f", "description": "d"}}],
    "falsy-function": [{"name": "f", "description": "d", "function": {}}],
    "non-dict-param-specs": [{"name": "f", "description": "d", "parameters": {
        "properties": {"a": "string", "b": 5, "c": None, "d": ["x"], "e": True}}}],
    "function-and-flat-fields": [{"name": "outer", "description": "outer",
                                  "function": {"name": "inner", "description": "inner"}}],
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", sorted(TOOL_LISTS))
def test_tool_list(name, dialect):
    check_tools(dialect, TOOL_LISTS[name])


# (tool lists are also drawn by the conversation tests of test_render_oracle.py, hence
# fewer examples here)
@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=max(1, EXAMPLES // 2), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_tool_lists(dialect, data):
    check_tools(dialect, data.draw(S.tool_list_nonempty(dialect), label="tools"))


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=max(1, EXAMPLES // 4), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_wild_tool_lists(dialect, data):
    check_tools(dialect, data.draw(S.tool_list_nonempty(dialect, wild=True), label="tools"))


class _Name(str):
    """A property name that is a str subclass with its own equality."""

    def __eq__(self, other):
        return str.__eq__(self.upper(), str(other).upper())

    __hash__ = str.__hash__


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("required", [
    [f"p{i}" for i in range(0, 100, 2)] + ["nope", "p3"],    # long: looked up in a set
    [f"p{i}" for i in range(0, 100, 2)] + [7, None],          # not all strings: the list
    ["P3"] + [f"p{i}" for i in range(0, 100, 2)],             # a str subclass name below
    "p1p2p30",                                                # a string: substring tests
    tuple(f"p{i}" for i in range(50)),
    [f"p{i}" for i in range(0, 40, 3)],                      # short: the template's test
])
def test_many_properties_and_a_long_required_list(required, dialect):
    props = {f"p{i}": {"type": "string"} for i in range(100)}
    props[_Name("p3x")] = {"type": "number"}
    if required and required[0] == "P3":
        props = {_Name("p3") if k == "p3" else k: v for k, v in props.items()}
    params = {"type": "object", "properties": props, "required": required}
    check_tools(dialect, [{"name": "f", "description": "d", "parameters": params}])
    check_tools(dialect, [_tool(params, required=["p"])])   # a nested object's properties


def test_required_properties_are_not_looked_up_one_by_one():
    """The template tests each property against the required list, a scan: quadratic
    in the properties (8,000 required: 0.66 s, 16,000: 2.6 s). Where a set gives the
    same answer (exact strings), it is used. Counted: the list items scanned."""
    from tests.fresh import source_module

    source = source_module("_render")
    scanned = [0]
    not_in = source.not_in

    def counted(name, container):
        scanned[0] += len(container)
        return not_in(name, container)

    source.not_in = counted
    n = 2000
    props = {f"p{i}": {"type": "string"} for i in range(n)}
    params = {"type": "object", "properties": props, "required": list(props)[::2]}
    tool = {"name": "f", "description": "d", "parameters": params}
    nested = {"name": "g", "description": "d", "parameters": {
        "type": "object", "properties": {"o": params}}}
    for dialect in DIALECTS:
        assert source.render_tools([tool, nested], dialect) == render_tools([tool, nested], dialect)
    assert scanned[0] < 10 * n, scanned[0]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_required_is_read_where_the_template_reads_it(dialect):
    """The template reads params.required after a property's description and name: a
    bad description is the error, before a required list whose truth test raises
    (review finding: the set lookup read it before the loop)."""

    class Ambiguous:
        def __bool__(self):
            raise ValueError("truth value is ambiguous")

    tools = [{"description": "d", "name": "f", "parameters": {
        "properties": {"a": {"description": 5}}, "required": Ambiguous()}}]
    check_tools(dialect, tools)
    with pytest.raises(RenderError, match='"description": expected a string'):
        render([{"role": "user", "content": "hi"}], dialect=dialect, tools=tools, date=DATE)
