"""Hypothesis strategies for the differential tests against the official templates.

Two families, built by one generator so that they share every shape:

* ``conversations(dialect)`` / ``render_inputs(dialect)``: what real data looks like
  (mostly accepted by the templates), but reaching every branch of every template:
  system as string / ``{"text"}`` / missing; user string / ``{"parts": [...]}`` /
  list (1.5) with text, image and audio parts; assistant strings or ``{"blocks": [...]}``
  with thoughts / tool_calls / tool_outputs / response in any order (consecutive
  thoughts, ``display_answers`` calls after thoughts, responses after tool outputs...);
  OpenAI ``tool_calls``; merged tool messages; consecutive assistant messages; unicode
  and special tokens in every text; non-string leaves where the templates print them.
  About one example in five may also contain shapes the dialect rejects (mixed
  assistant formats, unknown parts, ...); about 90% of examples render.
* ``wild_render_inputs(dialect)``: the same shapes with any field replaced by an
  arbitrary JSON value or dropped, plus fully random JSON messages: for error parity.

``tool_lists()`` / ``tool_list_nonempty()`` / ``tool_schemas()`` generate tool specs
(flat and OpenAI-shaped) with JSON-schema parameters covering every branch of the
``render_typescript_type`` / ``render_tools`` macros.

Every strategy takes the ``dialect`` it is for (or None): it only changes how often
shapes that dialect rejects are drawn, never which shapes can be drawn.
Leaves come mostly from fixed, deterministically built pools (one draw each: large
conversations stay fast to generate) and partly from Hypothesis' own text / JSON.

All strategies produce plain JSON-like data (dicts, lists, str, int, float, bool, None).
"""

from __future__ import annotations

import copy
import datetime as _dt
import functools
import json
import random

from hypothesis import strategies as st

__all__ = [
    "DIALECTS",
    "texts",
    "json_values",
    "tool_schemas",
    "tool_lists",
    "tool_list_nonempty",
    "conversations",
    "wild_conversations",
    "render_flags",
    "render_inputs",
    "wild_render_inputs",
]

DIALECTS = ("apertus-format-reference", "apertus-1", "apertus-1.5")

# ---------------------------------------------------------------------------------------
# leaves

#: Interesting pieces of text: HTML-sensitive characters (jinja's tojson escapes them),
#: quotes and backslashes (JSON escapes them), astral characters (surrogate pairs in
#: ASCII JSON), lone surrogates, newlines and separators, special tokens of every
#: dialect, Jinja syntax.
SNIPPETS = (
    "", " ", "a", "hello", "\n", "\t", "\r\n", "<", ">", "&", "'", '"', "\\", "\\n", "/",
    "{", "}", "[", "]", ", ", ": ", "|", "//", "Grüezi", "naïve", "日本語", "Ünïcödé",
    "😀", "𝔘𝔫𝔦", "\U0010fffd", "\u2028", "\u00a0", "\x00", "\x7f", "\ufeff",
    "\ud800", "\udfff",  # lone surrogates (json.loads produces them from "\\ud800")
    "<s>", "</s>", "<|system_start|>", "<|user_start|>", "<|user_end|>",
    "<|assistant_start|>", "<|assistant_end|>", "<|inner_prefix|>", "<|inner_suffix|>",
    "<|tools_prefix|>", "<|tools_suffix|>", "<|tool_output_start|>",
    "<|tool_output_end|>", "<|image|>", "<|audio|>", "<think>", "</script>",
    "{{ x }}", "{% if %}", "display_answers", "object | object", "null", "None", "True",
    "1.5", "-0", "any[]",
)
_snippet = st.sampled_from(SNIPPETS)

# Hypothesis draws every character of ``st.text()`` separately, which makes large
# conversations slow to generate; most leaves therefore come from fixed pools built
# deterministically here (one draw each, shrinking towards the simplest entries), and
# a minority from Hypothesis' own ``st.text()`` / ``st.recursive()`` for real fuzzing.

_CHAR_RANGES = (
    (40, 0x20, 0x7E),        # printable ASCII
    (6, 0x00, 0x1F),         # control characters
    (8, 0xA0, 0x24F),        # Latin-1 and Latin Extended
    (6, 0x370, 0x52F),       # Greek, Cyrillic
    (6, 0x4E00, 0x4FFF),     # CJK
    (3, 0x2000, 0x206F),     # general punctuation (incl. U+2028/2029)
    (3, 0xE000, 0xF8FF),     # private use
    (8, 0x1F300, 0x1FAFF),   # emoji (astral)
    (3, 0x1D400, 0x1D7FF),   # mathematical alphanumerics (astral)
    (2, 0x10000, 0x10FFFF),  # anything astral
)


def _random_text(rnd):
    pieces = []
    for _ in range(rnd.randint(1, 3)):
        if rnd.random() < 0.45:
            pieces.append(rnd.choice(SNIPPETS))
        else:
            _, lo, hi = rnd.choices(_CHAR_RANGES, weights=[w for w, _, _ in _CHAR_RANGES])[0]
            pieces.append("".join(chr(rnd.randint(lo, hi)) for _ in range(rnd.randint(1, 5))))
    return "".join(pieces)


def _random_json(rnd, depth=0):
    r = rnd.random()
    if depth < 2 and r < 0.15:
        return [_random_json(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    if depth < 2 and r < 0.30:
        return {rnd.choice(SNIPPETS + NAMES) if rnd.random() < 0.5 else _random_text(rnd):
                _random_json(rnd, depth + 1) for _ in range(rnd.randint(0, 3))}
    return rnd.choice((
        None, True, False, 0, 1, -1, 7, -(2**31), 2**53 + 1, 2**64, -(10**30), 0.0, -0.0, 0.5,
        1.0, -2.5, 1e16, 1e-7, 1.7976931348623157e308, 5e-324, 123456.789,
        "", "x", "<&>'\"", "😀",
    )) if rnd.random() < 0.5 else _random_text(rnd)


#: Names (tools, properties, calls), including names of dict methods (the templates
#: read ``param_spec['items']``, which falls back to ``dict.items`` when absent).
NAMES = (
    "search", "get_weather", "display_answers", "calc", "items", "keys", "values", "get",
    "type", "properties", "required", "description", "default", "a", "x_1", "naïve",
    "名前", "with space", "<b>", "🐍", "", "0",
)

_rnd = random.Random(20240901)
TEXT_POOL = tuple(sorted(set(SNIPPETS) | {_random_text(_rnd) for _ in range(3000)},
                         key=lambda t: (len(t), t)))
JSON_POOL = tuple(sorted((_random_json(_rnd) for _ in range(1500)),
                         key=lambda v: len(repr(v))))
del _rnd


def _fresh(value):
    """A private copy of a pooled container (the renderer must not see shared objects)."""
    return copy.deepcopy(value) if isinstance(value, (dict, list)) else value


_pool_text = st.sampled_from(TEXT_POOL)

#: Text anywhere: pooled interesting text (snippets, special tokens, every unicode plane),
#: and arbitrary unicode from Hypothesis.
texts = st.one_of(_pool_text, _pool_text, _pool_text, _pool_text, st.text(max_size=6))

names = st.one_of(st.sampled_from(NAMES), st.sampled_from(NAMES), texts)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from((0, 1, -1, 2**63, 10**30, -(2**70))),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)

_pool_json = st.sampled_from(JSON_POOL).map(_fresh)

#: Any JSON value (no NaN / infinities).
json_values = st.one_of(
    _pool_json, _pool_json, _pool_json,
    st.recursive(
        _scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.one_of(_snippet, st.text(max_size=4)), inner, max_size=3),
        ),
        max_leaves=4,
    ),
)

_JSON_DICT_POOL = tuple(v for v in JSON_POOL if isinstance(v, dict) and v)
_json_dicts = st.one_of(
    st.sampled_from(_JSON_DICT_POOL).map(_fresh), st.sampled_from(_JSON_DICT_POOL).map(_fresh),
    st.dictionaries(st.one_of(st.sampled_from(NAMES), st.text(max_size=4)), json_values,
                    min_size=1, max_size=3),
)

#: Values the templates print with ``{{ }}`` (Python ``str()`` of non-strings).
_non_string_leaves = st.one_of(
    st.sampled_from([v for v in JSON_POOL if not isinstance(v, str)]).map(_fresh),
    st.none(), st.booleans(), st.integers(min_value=-1000, max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
)

#: Sentinel: the key is absent from the dict being built.
MISSING = object()

_wild_values = st.one_of(
    st.just(MISSING), st.none(), st.booleans(), st.integers(min_value=-3, max_value=3),
    st.just(""), texts, st.lists(json_values, max_size=2), _json_dicts,
    st.sampled_from(({}, [], [{}], {"type": "text"}, "function", "object", "array")).map(_fresh),
)

_wild_present = _wild_values.filter(lambda v: v is not MISSING)

# ---------------------------------------------------------------------------------------
# the generator


@functools.lru_cache(maxsize=None)
def _ints(lo, hi):
    return st.integers(lo, hi)


class _Gen:
    """One example being drawn. ``wild`` replaces / drops fields at random."""

    def __init__(self, draw, dialect=None, wild=False):
        self.draw = draw
        self.dialect = dialect
        self.wild = wild
        self.v15 = dialect == "apertus-1.5"
        self.v1 = dialect == "apertus-1"
        self.ref = dialect == "apertus-format-reference"
        #: Whether invalid shapes may be drawn (always when wild; in a realistic example
        #: only sometimes, so that most realistic examples are accepted whole).
        self.allow_bad = wild or self.chance(20)

    def bad(self, weight):
        """Weight of an option the templates reject (0 in clean examples)."""
        return weight if self.allow_bad else 0

    # -- choices (all shrink towards the first / the simplest option) ------------------
    def chance(self, pct: int) -> bool:
        if pct <= 0:
            return False
        return self.draw(_ints(0, 99)) >= 100 - pct

    def choose(self, *options):
        """``options``: (weight, value) pairs; returns a value (shrinks to the first)."""
        total = sum(w for w, _ in options if w > 0)
        n = self.draw(_ints(0, total - 1))
        for w, value in options:
            if w <= 0:
                continue
            if n < w:
                return value
            n -= w
        raise AssertionError("unreachable")

    def count(self, lo, hi):
        return self.draw(_ints(lo, hi))

    def text(self):
        return self.draw(texts)

    def printable(self, pct_non_string=8):
        """A value the template prints (``{{ x }}``): mostly text, sometimes not."""
        if self.chance(pct_non_string):
            return self.draw(_non_string_leaves)
        return self.text()

    # -- wildness ----------------------------------------------------------------------
    def obj(self, *pairs):
        """Build a dict from (key, thunk) pairs; a thunk returning MISSING drops the key.
        In wild mode, some dicts get one field replaced by any JSON value or dropped, or
        an unknown key added (one draw per dict when nothing happens: keeps it fast)."""
        mutate = -1
        if self.wild and self.chance(10):
            mutate = self.count(0, len(pairs))  # len(pairs): add an unknown key
        out = {}
        for i, (key, make) in enumerate(pairs):
            value = self.draw(_wild_values) if i == mutate else make()
            if value is not MISSING:
                out[key] = value
        if mutate == len(pairs):
            out[self.draw(names)] = self.draw(json_values)
        return out

    def seq(self, make, lo, hi):
        """A list of ``make()``; in wild mode sometimes not a list at all."""
        if self.wild and self.chance(4):
            return self.draw(_wild_present)
        return [make() for _ in range(self.count(lo, hi))]

    # -- tool schemas --------------------------------------------------------------------
    def schema(self, depth=0, *, variant=False):
        deep = depth < 3
        kind = self.choose(
            (14, "string"), (8, "number"), (6, "integer"), (6, "boolean"),
            (16 if deep else 2, "array"), (12 if deep else 1, "object"),
            (7, "typelist"), (8 if deep else 1, "oneOf"), (8, "enum"),
            (3, "untyped"), (3, "othertype"),
        )
        s = {}
        if kind in ("string", "number", "integer", "boolean"):
            s["type"] = kind
        elif kind == "enum":
            if self.chance(80):
                s["type"] = "string"
                s["enum"] = self.draw(st.lists(texts, min_size=0, max_size=4))
            else:  # enum on a non-string type: the type wins, a default must be a string
                s["type"] = self.choose((1, "integer"), (1, "number"))
                s["enum"] = self.draw(st.lists(st.integers(-5, 5), max_size=3))
        elif kind == "array":
            s["type"] = "array"
            items = self.choose(
                (30, "scalar"), (30, "nested"), (12, "missing"), (8, "empty"), (3, "null"),
                (3, "tuple"), (2, "string"),
            )
            if items == "scalar":
                s["items"] = {"type": self.choose((3, "string"), (2, "number"), (2, "integer"),
                                                  (2, "boolean"))}
                if self.chance(20):
                    s["items"]["description"] = self.text()
            elif items == "nested":
                s["items"] = self.schema(depth + 1)
            elif items == "empty":
                s["items"] = {}
            elif items == "null":
                s["items"] = None
            elif items == "tuple":
                s["items"] = [self.schema(depth + 1) for _ in range(self.count(1, 2))]
            elif items == "string":
                s["items"] = "string"
        elif kind == "object":
            s["type"] = "object"
            self.properties(s, depth)
        elif kind == "typelist":
            s["type"] = self.choose(
                (5, ["string", "null"]), (4, ["object", "object"]), (2, ["integer"]),
                (2, ["array", "null"]), (2, ["number", "string", "boolean"]), (2, []),
                (1, ["object"]), (1, [1, None]), (1, ["string", "string"]),
            )
            if self.chance(15):
                s["items"] = {"type": "string"}
        elif kind == "oneOf":
            s["oneOf"] = [self.schema(depth + 1, variant=True) for _ in range(self.count(1, 3))]
        elif kind == "othertype":
            s["type"] = self.choose((3, "null"), (2, "any"), (1, "String"), (1, None))
        if self.chance(25):
            s["description"] = self.choose((9, "text"), (1, ""))
            if s["description"] == "text":
                s["description"] = self.text()
        if self.chance(15):
            s["nullable"] = self.choose((5, True), (2, False), (1, 1), (1, None))
        if self.chance(30 if variant else 22):
            if "enum" in s and not self.chance(self.bad(10)):
                s["default"] = (self.draw(st.sampled_from(s["enum"])) if s["enum"]
                                and isinstance(s["enum"][0], str) else self.text())
            elif "oneOf" in s and not self.chance(self.bad(10)):
                s["default"] = self.text()
            else:
                s["default"] = self.draw(json_values)
        if self.wild:
            s = self.obj(*((k, (lambda v=v: v)) for k, v in s.items()))
        return s

    def properties(self, s, depth):
        shape = self.choose((80, "dict"), (8, "empty"), (6, "missing"), (3, "null"))
        if shape == "missing":
            return
        if shape == "null":
            s["properties"] = None
            return
        props = {}
        if shape == "dict":
            for _ in range(self.count(1, 4)):
                props[self.draw(names)] = self.schema(depth + 1)
        s["properties"] = props
        req = self.choose((50, "subset"), (25, "missing"), (5, "extra"), (5, "null"),
                          (5, "empty"), (2, "string"))
        keys = list(props)
        if req == "subset":
            s["required"] = [k for k in keys if self.chance(50)]
        elif req == "extra":
            s["required"] = keys + [self.draw(names)]
        elif req == "null":
            s["required"] = None
        elif req == "empty":
            s["required"] = []
        elif req == "string":  # `x in "abc"` is a substring test in Jinja
            s["required"] = "".join(keys[:1]) + "x"

    def parameters(self):
        shape = self.choose((80, "object"), (6, "missing"), (3, "null"), (3, "empty"),
                            (3, "no-properties"), (3, "empty-properties"), (2, "list"))
        if shape == "missing":
            return MISSING
        if shape == "null":
            return None
        if shape == "empty":
            return {}
        if shape == "list":
            return [self.schema(2)]
        p = {"type": "object"}
        if shape == "no-properties":
            return p
        if shape == "empty-properties":
            p["properties"] = {}
            return p
        self.properties(p, 0)
        if "properties" not in p:
            p["properties"] = {self.draw(names): self.schema(1)}
        return p

    def tool(self):
        flat = self.obj(
            ("name", lambda: self.draw(names)),
            ("description", lambda: MISSING if self.chance(self.bad(3)) else self.text()),
            ("parameters", self.parameters),
        )
        # OpenAI shape: native in 1.5, unwrapped by apertus-fast in every dialect
        shape = self.choose((60, "flat"), (36, "openai"), (2, "function-only"),
                            (2, "falsy-function"), (2, "flat-and-function"))
        if shape == "openai":
            return self.obj(("type", lambda: "function"), ("function", lambda: flat))
        if shape == "function-only":
            return {"function": flat}
        if shape == "flat-and-function":  # 1.5 renders the inner spec, the others the outer
            return {**flat, "function": {"name": self.draw(names), "description": self.text()}}
        if shape == "falsy-function":
            flat["function"] = self.choose((1, {}), (1, None), (1, ""))
        return flat

    def tools(self):
        shape = self.choose((35, "none"), (5, "empty"), (60, "list"))
        if shape == "none":
            return None
        if shape == "empty":
            return []
        return self.seq(self.tool, 1, 3)

    # -- messages ------------------------------------------------------------------------
    def system(self):
        form = self.choose((45, "string"), (45, "text"), (self.bad(2), "no-content"),
                           (self.bad(2), "null"), (self.bad(2), "mapping-without-text"),
                           (self.bad(2), "list"), (self.bad(2), "text-not-string"))
        if form == "string":
            content = self.text()
        elif form == "text":
            content = self.obj(("text", self.text))
        elif form == "no-content":
            return self.obj(("role", lambda: "system"))
        elif form == "null":
            content = None
        elif form == "mapping-without-text":
            content = {"parts": [{"type": "text", "text": self.text()}]}
        elif form == "list":
            content = [{"type": "text", "text": self.text()}]
        else:
            content = {"text": self.draw(_non_string_leaves)}
        return self.obj(("role", lambda: "system"), ("content", lambda: content))

    def part(self):
        image = 30 if not self.ref else self.bad(3)
        audio = 20 if self.v15 else self.bad(3)
        kind = self.choose((60, "text"), (image, "image"), (audio, "audio"),
                           (self.bad(3), "unknown"), (1, "text-without-text"))
        if kind == "text":
            return self.obj(("type", lambda: "text"), ("text", self.printable))
        if kind == "text-without-text":
            return {"type": "text"}
        if kind == "image":
            other = 1 if self.v15 else self.bad(1)
            t = self.choose((3, "image"), (other, "image_url"), (other, "input_image"))
            payload = {"image": "data:image/png;base64,AAAA", "image_url": {"url": "https://x/y.png"},
                       "input_image": {"data": "AAAA"}}[t]
            return self.obj(("type", lambda: t), (t, lambda: payload))
        if kind == "audio":
            t = self.choose((2, "audio"), (1, "audio_url"), (1, "input_audio"))
            return self.obj(("type", lambda: t), (t, lambda: {"data": "AAAA", "format": "wav"}))
        return self.obj(("type", lambda: self.choose((2, "video"), (1, "Text"), (1, ""),
                                                     (1, "file"))))

    def user(self):
        form = self.choose((55, "string"), (25, "parts"),
                           (15 if self.v15 else self.bad(3), "list"), (3, "no-content"),
                           (self.bad(1), "null"), (self.bad(1), "mapping-without-parts"),
                           (self.bad(1), "number"))
        if form == "string":
            content = self.text()
        elif form == "parts":
            content = self.obj(("parts", lambda: self.seq(self.part, 0, 4)))
        elif form == "list":
            content = self.seq(self.part, 0, 4)
        elif form == "no-content":
            return self.obj(("role", lambda: "user"))
        elif form == "null":
            content = None
        elif form == "mapping-without-parts":
            content = {"text": self.text()}
        else:
            content = self.draw(st.integers(-5, 5))
        return self.obj(("role", lambda: "user"), ("content", lambda: content))

    def call_name(self):
        return self.choose((5, "search"), (3, "display_answers"), (3, None))\
            or self.draw(names)

    def arguments(self, legacy=False):
        form = self.choose((50, "json"), (15, "ascii-json"), (10, "text"),
                           (25 if self.v15 else self.bad(3), "dict"),
                           (self.bad(3), "other-json"),
                           (self.bad(3) if legacy and self.v15 else 3, "empty"))
        if form == "json":
            return json.dumps(self.draw(_json_dicts), ensure_ascii=False)
        if form == "ascii-json":
            return json.dumps(self.draw(_json_dicts))
        if form == "text":
            return self.text()
        if form == "dict":
            return self.draw(_json_dicts)
        if form == "other-json":
            return self.draw(st.one_of(st.lists(_scalars, max_size=2), st.integers(), st.none()))
        if self.v15:  # tojson("") is '""'; an empty legacy call fails in 1.5
            return self.choose((2, ""), (1, {}))
        return self.choose((2, ""), (1, "{}"), (self.bad(1), {}))

    def block_call(self):
        base = self.obj(("name", self.call_name), ("arguments", self.arguments))
        if self.chance(25 if self.v15 else self.bad(3)):
            return self.obj(("type", lambda: "function"), ("function", lambda: base))
        return base

    def legacy_call(self):
        base = self.obj(("name", self.call_name), ("arguments", lambda: self.arguments(True)))
        shape = self.choose((80, "openai"), (12 if self.v15 else self.bad(2), "no-type"),
                            (5 if self.v15 else self.bad(2), "flat"),
                            (self.bad(2), "other-type"), (self.bad(1), "no-function"))
        if shape == "openai":
            call = self.obj(("type", lambda: "function"), ("function", lambda: base))
            if self.chance(20):
                call = {"id": "call_" + str(self.count(0, 99)), **call}
            return call
        if shape == "no-type":
            return {"function": base}
        if shape == "flat":
            return {"type": "function", **base}
        if shape == "other-type":
            return {"type": self.choose((2, "tool"), (1, None), (1, "")), "function": base}
        return {"type": "function"}

    def block(self, kind=None):
        if kind is None:
            kind = self.choose((30, "thoughts"), (25, "tool_calls"), (15, "tool_outputs"),
                               (28, "response"), (self.bad(2), "unknown"))
        if kind in ("thoughts", "response"):
            return self.obj(("type", lambda: kind), ("text", self.printable))
        if kind == "tool_calls":
            if self.chance(25):  # the display_answers rule: exactly one call of that name
                calls = [self.obj(("name", lambda: "display_answers"),
                                  ("arguments", self.arguments))]
            else:
                calls = self.seq(self.block_call, 0, 3)
            return self.obj(("type", lambda: "tool_calls"), ("calls", lambda: calls))
        if kind == "tool_outputs":
            return self.obj(
                ("type", lambda: "tool_outputs"),
                ("outputs", lambda: self.seq(lambda: self.obj(("output", self.printable)), 0, 3)),
            )
        return self.obj(("type", lambda: self.choose((3, "thought"), (1, "text"), (1, ""))))

    def blocks(self):
        """Blocks in any order, or (half the time) in the shape real agent turns have:
        rounds of [thoughts] tool_calls [tool_outputs], then [thoughts] [response]."""
        if self.chance(50):
            return self.seq(self.block, 0, 5)
        out = []
        for _ in range(self.choose((2, 1), (2, 2), (1, 0), (1, 3))):
            if self.chance(60):
                out.append(self.block("thoughts"))
            out.append(self.block("tool_calls"))
            if self.chance(70):
                out.append(self.block("tool_outputs"))
        if self.chance(40):
            out.append(self.block("thoughts"))
        if self.chance(60):
            out.append(self.block("response"))
        return out

    def assistant(self, fmt):
        form = self.choose((95, fmt), (self.bad(3), "other"), (self.bad(1), "no-content"),
                           (self.bad(1), "null"), (self.bad(1), "mapping-without-blocks"))
        if form == "other":
            form = "blocks" if fmt == "string" else "string"
        if form == "string":
            content = self.text()
        elif form == "blocks":
            content = self.obj(("blocks", self.blocks))
        elif form == "null":
            content = None
        elif form == "mapping-without-blocks":
            content = {"text": self.text()}
        else:
            content = MISSING
        pairs = [("role", lambda: "assistant"), ("content", lambda: content)]
        tc = self.choose((75, "none"), (20, "calls"), (3, "empty"), (2, "null"))
        if tc == "calls":
            pairs.append(("tool_calls", lambda: self.seq(self.legacy_call, 1, 3)))
        elif tc == "empty":
            pairs.append(("tool_calls", lambda: []))
        elif tc == "null":
            pairs.append(("tool_calls", lambda: None))
        return self.obj(*pairs)

    def tool_message(self):
        return self.obj(("role", lambda: "tool"),
                        ("content", lambda: self.printable() if not self.chance(2) else MISSING))

    def odd_message(self):
        return self.choose(
            (3, {"role": "system", "content": "late system"}), (2, {"role": "developer", "content": "d"}),
            (1, {"content": "no role"}), (1, {"role": None, "content": "x"}),
            (1, {"role": "User", "content": "x"}),
        )

    def messages(self):
        if self.wild and self.chance(5):
            return self.draw(st.lists(json_values, max_size=4))
        msgs = []
        if self.chance(55):
            msgs.append(self.system())
        fmt = self.choose((1, "string"), (1, "blocks"))
        for turn in range(self.count(0, 4)):
            start = self.choose((88, "user"), (6, "assistant"), (self.bad(3), "tool"),
                                (self.bad(3), "odd"))
            if start == "user":
                msgs.append(self.user())
            elif start == "tool":
                msgs.append(self.tool_message())
            elif start == "odd":
                msgs.append(self.odd_message())
            for _ in range(self.choose((8, 1), (10, 2), (4, 3), (3, 0))):
                msgs.append(self.assistant(fmt))
                for _ in range(self.choose((55, 0), (30, 1), (15, 2))):
                    msgs.append(self.tool_message())
        if self.wild and msgs and self.chance(10):
            i = self.count(0, len(msgs) - 1)
            msgs[i] = self.draw(json_values)
        return msgs

    def flags(self):
        return dict(
            enable_thinking=self.chance(50),
            add_generation_prompt=self.chance(50),
            continue_assistant_message=self.chance(50),
            bos_token=self.choose((6, "<s>"), (1, ""), (1, "<|begin_of_text|>"), (1, "ß\n")),
            date=self.choose((4, "2026-01-01"), (1, "1999-12-31"), (1, _dt.date(2024, 2, 29)),
                             (1, _dt.datetime(2031, 7, 4, 23, 59, 59))),
        )


# ---------------------------------------------------------------------------------------
# public strategies


@st.composite
def tool_schemas(draw, dialect=None, wild=False):
    """One JSON schema of a tool parameter."""
    return _Gen(draw, dialect, wild).schema()


@st.composite
def tool_lists(draw, dialect=None, wild=False):
    """``tools`` argument: None, [] or a list of flat / OpenAI-shaped tool specs."""
    return _Gen(draw, dialect, wild).tools()


@st.composite
def tool_list_nonempty(draw, dialect=None, wild=False):
    """A non-empty list of tool specs (for tool-signature tests)."""
    g = _Gen(draw, dialect, wild)
    return [g.tool() for _ in range(g.count(1, 3))]


@st.composite
def conversations(draw, dialect=None):
    """``messages``: realistic conversations, mostly accepted by ``dialect``."""
    return _Gen(draw, dialect).messages()


@st.composite
def wild_conversations(draw, dialect=None):
    """``messages``: the same shapes with fields replaced or dropped at random."""
    return _Gen(draw, dialect, wild=True).messages()


@st.composite
def render_flags(draw):
    """enable_thinking, add_generation_prompt, continue_assistant_message, bos_token, date."""
    return _Gen(draw).flags()


@st.composite
def render_inputs(draw, dialect=None):
    """Keyword arguments of ``render`` (without ``dialect``): a realistic case."""
    g = _Gen(draw, dialect)
    return dict(messages=g.messages(), tools=g.tools(), **g.flags())


@st.composite
def wild_render_inputs(draw, dialect=None):
    """Keyword arguments of ``render`` (without ``dialect``): a wild case."""
    g = _Gen(draw, dialect, wild=True)
    return dict(messages=g.messages(), tools=g.tools(), **g.flags())


def tool_turns(n):
    """``n`` user questions, each answered by a block assistant with a tool call, its
    output and a response: a long conversation of many small dicts and lists (the parse
    of its text makes thousands of them)."""
    messages = []
    for i in range(n):
        messages += [{"role": "user", "content": f"q{i}"},
                     {"role": "assistant", "content": {"blocks": [
                         {"type": "tool_calls", "calls": [{"name": "f", "arguments": '{"a": 1}'}]},
                         {"type": "tool_outputs", "outputs": [{"output": "x"}]},
                         {"type": "response", "text": "ok"}]}}]
    return messages
