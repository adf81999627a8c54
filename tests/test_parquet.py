"""Parquet in and out (``apertus_fast._parquet`` and the commands' use of it).

A Parquet row must mean what the same conversation means as a JSONL line: rendered
through the command, it gives the bytes ``render`` gives for the original dicts. The
JSON-text columns are exact; struct columns are exact up to what Arrow's types keep
(checked by a property over generated values).
"""

from __future__ import annotations

import datetime as dt
import json
import sys

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[test]')")
pq = pytest.importorskip("pyarrow.parquet")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from apertus_fast import _parquet, cli, render, render_with_spans  # noqa: E402
from apertus_fast._io import InputError  # noqa: E402

from .test_cli import DATE, expected_render, read_json_lines, sample_values  # noqa: E402

TOOLS = [
    {"name": "get_weather", "description": "Weather for a city",
     "parameters": {"type": "object", "required": ["city"], "properties": {
         "city": {"type": "string", "description": "City name"},
         "days": {"type": "integer", "default": 3}}}},
    {"name": "convert", "description": "Convert money",
     "parameters": {"type": "object", "required": ["amount", "to"], "properties": {
         "amount": {"type": "number"},
         "to": {"type": "string", "enum": ["CHF", "EUR", "USD"]}}}},
]

#: Conversations in the shape Hugging Face datasets store (one Arrow type for all rows:
#: string contents, OpenAI tool calls, tools as structs).
HF_ROWS = [
    {"messages": [
        {"role": "user", "content": "Wetter in Bern?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather",
                                              "arguments": '{"city": "Bern"}'}}]},
        {"role": "tool", "content": '{"temperature": 3}'},
        {"role": "assistant", "content": "3 °C in Bern."}],
     "tools": TOOLS[:1], "enable_thinking": True},
    {"messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "100 CHF in EUR? 💶"},
        {"role": "assistant", "content": "About 106 EUR."}],
     "tools": TOOLS, "enable_thinking": False},
]


def main(*argv) -> int:
    return cli.main([str(a) for a in argv])


def json_table(values) -> "pa.Table":
    """The JSONL sample values as a table with ``messages`` and ``tools`` as JSON text
    (the storage for heterogeneous conversations) and the options as typed columns."""
    rows = [v if isinstance(v, dict) else {"messages": v} for v in values]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    columns = {}
    for key in keys:
        col = [r.get(key) for r in rows]
        if key in ("messages", "tools"):
            col = [None if v is None else json.dumps(v, ensure_ascii=False) for v in col]
        columns[key] = col
    return pa.table(columns)


def write(table, path):
    pq.write_table(table, path)
    return path


def expected_lines(values, dialect="apertus-format-reference"):
    return [expected_render(v, dialect=dialect) for v in values]


# --------------------------------------------------------------------------- render


@pytest.mark.parametrize("dialect", ["apertus-format-reference", "apertus-1", "apertus-1.5"])
def test_render_json_columns_equal_jsonl(tmp_path, dialect, capsys):
    values = sample_values()
    src = write(json_table(values), tmp_path / "conv.parquet")
    out = tmp_path / "out.jsonl"
    assert main("render", src, "-o", out, "--dialect", dialect, "--date", DATE) == 0
    assert read_json_lines(out) == expected_lines(values, dialect)
    err = capsys.readouterr().err
    assert f"rendered {len(values)}, failed 0 in " in err and "rows/s" in err


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_json_extension_columns_are_json_text(tmp_path, capsys, jobs):
    """pyarrow 19 and later read a string column annotated as JSON as
    ``extension<arrow.json>``: its values are JSON text, as a string column's. Every
    row failed (``messages must be a list of message dicts, got str``). Kept, it stays
    that type in a Parquet output, and JSON text (a string) in JSONL."""
    values = [v for v in sample_values() if isinstance(v, dict) and "tools" in v][:1] + [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]]
    table = json_table(values)
    assert "tools" in table.column_names
    for name, t in (("messages", pa.json_(pa.large_string())), ("tools", pa.json_())):
        i = table.column_names.index(name)
        table = table.set_column(i, name, table.column(name).cast(t))
    table = table.append_column("meta", pa.array(['{"a": 1}', None], pa.json_()))
    src = write(table, tmp_path / "ext.parquet")
    assert pq.read_schema(src).field("messages").type == pa.json_(pa.large_string())
    out = tmp_path / "out.jsonl"
    assert main("render", src, "-o", out, "--date", DATE, "--keep", "meta", "-j", jobs) == 0
    texts = expected_lines(values)
    assert read_json_lines(out) == [{"meta": '{"a": 1}', "text": texts[0]},
                                    {"meta": None, "text": texts[1]}]
    out = tmp_path / "out.parquet"
    assert main("render", src, "-o", out, "--date", DATE, "--keep", "meta", "-j", jobs) == 0
    got = pq.read_table(out)
    assert got.schema.field("meta").type == pa.json_()
    assert got.to_pylist() == [{"text": texts[0], "meta": '{"a": 1}'},
                               {"text": texts[1], "meta": None}]
    assert main("validate", src, "-j", jobs) == 0
    capsys.readouterr()


def test_render_to_parquet_text_and_spans(tmp_path, capsys):
    values = sample_values()
    src = write(json_table(values), tmp_path / "conv.parquet")
    out = tmp_path / "out.parquet"
    assert main("render", src, "-o", out, "--date", DATE) == 0
    table = pq.read_table(out)
    assert table.schema.names == ["text"]
    assert table.column("text").to_pylist() == expected_lines(values)

    assert main("render", src, "-o", out, "--date", DATE, "--spans", "--dialect", "apertus-1") == 0
    table = pq.read_table(out)
    assert table.schema.names == ["text", "spans"]
    for value, text, spans in zip(values, table.column("text").to_pylist(),
                                  table.column("spans").to_pylist()):
        messages = value["messages"] if isinstance(value, dict) else value
        kw = {k: value[k] for k in ("tools", "enable_thinking", "add_generation_prompt")
              if isinstance(value, dict) and k in value}
        expected = render_with_spans(messages, dialect="apertus-1", date=DATE, **kw)
        assert (text, [tuple(s) for s in spans]) == (expected.text, list(expected.spans))


def test_render_struct_columns_as_hugging_face_stores_them(tmp_path):
    table = pa.Table.from_pylist(HF_ROWS)
    # Arrow fills the fields a row lacks with nulls: the user message has tool_calls=null
    # and the first tool's properties carry "amount" and "to" as nulls
    first = table.column("messages").to_pylist()[0][0]
    assert first["tool_calls"] is None
    src = write(table, tmp_path / "hf.parquet")
    out = tmp_path / "out.jsonl"
    for dialect in ("apertus-1", "apertus-1.5"):
        assert main("render", src, "-o", out, "--dialect", dialect, "--date", DATE) == 0
        assert read_json_lines(out) == [
            render(r["messages"], tools=r["tools"], enable_thinking=r["enable_thinking"],
                   dialect=dialect, date=DATE) for r in HF_ROWS]


def test_read_parquet_drops_null_struct_fields_and_converts_maps_and_dates(tmp_path):
    props = pa.map_(pa.string(), pa.struct([("type", pa.string()), ("description", pa.string())]))
    table = pa.table({
        "messages": pa.array([[{"role": "user", "content": "hi", "name": None}]]),
        "tools": pa.array([[{"name": "f", "parameters": [("b", {"type": "string", "description": None}),
                                                         ("a", {"type": "integer", "description": "A"})]}]],
                          type=pa.list_(pa.struct([("name", pa.string()), ("parameters", props)]))),
        "date": pa.array([dt.date(2026, 3, 4)], type=pa.date32()),
        "other": ["ignored"],
    })
    rows = list(_parquet.read_parquet(write(table, tmp_path / "t.parquet"),
                                      columns=["messages", "tools", "date", "missing"]))
    assert rows == [(1, {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "f", "parameters": {"b": {"type": "string"},
                                               "a": {"type": "integer", "description": "A"}}}],
        "date": "2026-03-04",
    })]
    assert list(rows[0][1]["tools"][0]["parameters"]) == ["b", "a"]  # the map's order


def test_render_date_column(tmp_path):
    table = pa.table({"messages": [json.dumps([{"role": "user", "content": "Datum?"}])] * 2,
                      "date": pa.array([dt.date(2026, 5, 6), None], type=pa.date32())})
    out = tmp_path / "out.jsonl"
    assert main("render", write(table, tmp_path / "d.parquet"), "-o", out, "--date", DATE) == 0
    texts = read_json_lines(out)
    assert "Current date: 2026-05-06" in texts[0] and f"Current date: {DATE}" in texts[1]


def test_bad_rows_are_reported_with_their_row_number(tmp_path, capsys):
    good = json.dumps([{"role": "user", "content": "ok"}])
    table = pa.table({"messages": [good, "[not json", None, good,
                                   json.dumps([{"role": "assistant", "content": 3}])],
                      "enable_thinking": pa.array([None, None, None, None, None], pa.bool_())})
    src = write(table, tmp_path / "bad.parquet")
    out = tmp_path / "out.parquet"
    assert main("render", src, "-o", out, "--date", DATE) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{src}:row 2: column \"messages\": invalid JSON at column ")
    assert err[1] == f'{src}:row 3: "messages" is null in this row'
    assert err[2].startswith(f"{src}:row 5: ") and "message 0" in err[2]
    assert err[3].startswith("rendered 2, failed 3 in ")
    assert pq.read_table(out).num_rows == 2


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_json_text_null_is_a_null_cell(tmp_path, capsys, jobs):
    """A JSON-text cell holding ``null`` is a null value, as a null cell is: the same
    problem in the same words (it was '"messages" is null in this line'), and with a
    "text" beside it the row is checked as that text, as a JSONL line's would be."""
    src = write(pa.table({"messages": ["null", None]}), tmp_path / "jnull.parquet")
    assert main("validate", src, "-j", jobs) == 1
    assert capsys.readouterr().out.splitlines() == [
        f'{src}:row {n}: "messages" is null in this row' for n in (1, 2)]
    text = render([{"role": "user", "content": "hi"}], dialect="apertus-1")
    src = write(pa.table({"messages": ["null"], "text": [text]}), tmp_path / "both.parquet")
    assert main("validate", src, "--dialect", "apertus-1", "-j", jobs) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_values_python_cannot_hold_fail_their_row(tmp_path, capsys, jobs):
    """A map key that is a list (no dict can hold it) and a struct with two fields of
    one name (pyarrow cannot give it as a dict) fail their rows with a reason, in one
    process and with --jobs alike; they stopped the command with a traceback."""
    ok = [{"role": "user", "content": "hi"}]
    keyed = pa.map_(pa.list_(pa.string()), pa.string())
    src = write(pa.table({"messages": pa.array([[[(["role"], "user")]], None], pa.list_(keyed)),
                          "id": [1, 2]}), tmp_path / "mapkey.parquet")
    assert main("validate", src, "-j", jobs) == 1
    assert capsys.readouterr().out.splitlines() == [
        f'{src}:row 1: column "messages": a map key is a list, which an object cannot have '
        "as a key", f'{src}:row 2: "messages" is null in this row']
    twice = pa.StructArray.from_arrays([pa.array(["user"] * 2), pa.array(["hi"] * 2),
                                        pa.array(["x"] * 2)], names=["role", "content", "content"])
    table = pa.table({"messages": [json.dumps(ok)] * 3,
                      "meta": pa.ListArray.from_arrays([0, 1, 1, 2], twice)})
    src = write(table, tmp_path / "dupfield.parquet")
    out = tmp_path / "out.jsonl"
    assert main("render", src, "--keep", "meta", "--date", DATE, "-o", out, "-j", jobs) == 1
    err = capsys.readouterr().err.splitlines()
    assert [e.split(": ", 1)[0] for e in err[:2]] == [f"{src}:row 1", f"{src}:row 3"]
    assert err[0].startswith(f'{src}:row 1: column "meta": ') and "duplicate field names" in err[0]
    assert read_json_lines(out) == [{"meta": [], "text": render(ok, date=DATE)}]
    src = write(table.rename_columns(["id", "messages"]), tmp_path / "dupmessages.parquet")
    assert main("validate", src, "-j", jobs) == 1
    assert [e.split(": ", 1)[0] for e in capsys.readouterr().out.splitlines()] == [
        f"{src}:row 1", f"{src}:row 3"]


def test_missing_column_is_exit_2_before_any_output(tmp_path, capsys):
    src = write(pa.table({"conversation": ["x"], "id": [1]}), tmp_path / "x.parquet")
    out = tmp_path / "out.jsonl"
    assert main("render", src, "-o", out) == 2
    err = capsys.readouterr().err
    assert 'has no "messages" column (its columns: conversation, id)' in err
    assert not out.exists()
    assert main("validate", src) == 2
    assert 'has no "messages" or "text" column' in capsys.readouterr().err


@pytest.mark.parametrize("data", [b"PAR1", b"PAR1 this is not parquet at all PAR1"])
def test_corrupt_parquet_is_exit_2(tmp_path, data, capsys):
    src = tmp_path / "broken.parquet"
    src.write_bytes(data)
    assert main("render", src, "-o", tmp_path / "out.jsonl") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"apertus-fast: error: cannot read {src} as Parquet: ")
    assert "Traceback" not in err and not (tmp_path / "out.jsonl").exists()


def test_forced_parquet_format_on_other_input(tmp_path, capsys):
    src = tmp_path / "t.jsonl"
    src.write_text('"<s>"\n')
    assert main("parse", src, "--format", "parquet") == 2
    assert "as Parquet" in capsys.readouterr().err


def test_parquet_on_stdin(tmp_path, monkeypatch, capsys):
    values = sample_values()[:5]
    data = (write(json_table(values), tmp_path / "c.parquet")).read_bytes()

    class Stdin:
        buffer = __import__("io").BufferedReader(__import__("io").BytesIO(data))

    monkeypatch.setattr(sys, "stdin", Stdin())
    out = tmp_path / "out.jsonl"
    assert main("render", "-", "-o", out, "--date", DATE) == 0
    assert read_json_lines(out) == expected_lines(values)


def test_gzipped_parquet(tmp_path, monkeypatch, capsys):
    """A gzipped Parquet file is recognised by the magic bytes inside and read (it was
    read as text: a row of invalid UTF-8 errors), from a file, with -j, and on stdin;
    a corrupt stream, or a temporary file that cannot be written, is exit 2."""
    import gzip
    import io

    values = sample_values()[:5]
    data = gzip.compress(write(json_table(values), tmp_path / "c.parquet").read_bytes())
    src = tmp_path / "c.parquet.gz"
    src.write_bytes(data)
    out = tmp_path / "out.jsonl"
    for jobs in ("1", "2"):
        assert main("render", src, "-o", out, "--date", DATE, "-j", jobs) == 0
        assert read_json_lines(out) == expected_lines(values)
    assert main("validate", src, "--format", "parquet") == 0
    capsys.readouterr()

    class Stdin:
        buffer = io.BufferedReader(io.BytesIO(data))

    monkeypatch.setattr(sys, "stdin", Stdin())
    assert main("render", "-", "-o", out, "--date", DATE) == 0
    assert read_json_lines(out) == expected_lines(values)
    capsys.readouterr()
    cut = tmp_path / "cut.parquet.gz"
    cut.write_bytes(data[:len(data) // 2])
    assert main("render", cut, "-o", tmp_path / "no.jsonl") == 2
    assert f"apertus-fast: error: cannot read {cut}: " in capsys.readouterr().err
    assert not (tmp_path / "no.jsonl").exists()

    class Full(io.BytesIO):
        def write(self, data):
            raise OSError(28, "No space left on device")

    import tempfile
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda **kw: Full())
    assert main("render", src, "-o", tmp_path / "no.jsonl") == 2
    assert capsys.readouterr().err == (f"apertus-fast: error: cannot read {src}: cannot decompress "
                                       "it into a temporary file: No space left on device\n")


def test_text_mode_cannot_write_parquet(tmp_path, capsys):
    src = write(json_table(sample_values()[:1]), tmp_path / "c.parquet")
    assert main("render", src, "--text", "-o", tmp_path / "out.parquet") == 2
    assert "--text writes raw text, not Parquet" in capsys.readouterr().err
    assert not (tmp_path / "out.parquet").exists()


def test_without_pyarrow_the_error_says_how_to_install(tmp_path, monkeypatch, capsys):
    src = write(json_table(sample_values()[:1]), tmp_path / "c.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    assert main("render", src) == 2
    assert "pip install 'apertus-fast[parquet]'" in capsys.readouterr().err
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps(sample_values()[0]) + "\n")
    assert main("render", jsonl, "-o", tmp_path / "out.parquet") == 2
    assert "pip install 'apertus-fast[parquet]'" in capsys.readouterr().err
    assert main("render", jsonl, "-o", tmp_path / "out.jsonl", "--date", DATE) == 0  # JSONL needs none


def test_lone_surrogates_cannot_be_parquet_text(tmp_path, capsys):
    rows = [[{"role": "user", "content": "fine"}], [{"role": "user", "content": "bad \ud800"}],
            [{"role": "user", "content": "fine too"}]]
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))  # \ud800 as a JSON escape
    out = tmp_path / "out.parquet"
    assert main("render", src, "-o", out, "--date", DATE) == 1
    err = capsys.readouterr().err
    assert f'{src}:2: cannot write "text" to Parquet: it holds a lone surrogate' in err
    assert "rendered 2, failed 1" in err
    assert pq.read_table(out).column("text").to_pylist() == [
        render(r, date=DATE) for r in (rows[0], rows[2])]


# --------------------------------------------------------------------------- parse and validate


def test_parse_parquet_round_trip(tmp_path, capsys):
    values = sample_values()
    texts = expected_lines(values, "apertus-1.5")
    src = write(pa.table({"id": list(range(len(texts))), "text": texts}), tmp_path / "r.parquet")
    parsed = tmp_path / "parsed.parquet"
    assert main("parse", src, "-o", parsed, "--dialect", "apertus-1.5") == 0
    table = pq.read_table(parsed)
    assert table.schema.field("messages").type == pa.string()  # JSON text
    assert table.column("dialect").to_pylist() == ["apertus-1.5"] * len(texts)
    jsonl = tmp_path / "parsed.jsonl"
    assert main("parse", src, "-o", jsonl, "--dialect", "apertus-1.5") == 0
    as_jsonl = read_json_lines(jsonl)
    for row, line in zip(table.to_pylist(), as_jsonl):
        assert json.loads(row.pop("messages")) == line.pop("messages")
        assert row == {k: line.get(k) for k in row}
    # and back: the parsed table renders to the same texts
    again = tmp_path / "again.parquet"
    assert main("render", parsed, "-o", again) == 0
    assert pq.read_table(again).column("text").to_pylist() == texts


def test_parse_binary_text_column_and_bad_rows(tmp_path, capsys):
    text = expected_render([{"role": "user", "content": "hoi"}], dialect="apertus-1")
    table = pa.table({"text": pa.array([text.encode(), b"\xff\xfe", None, b"<s>nope"],
                                       pa.binary())})
    src = write(table, tmp_path / "b.parquet")
    out = tmp_path / "out.jsonl"
    assert main("parse", src, "-o", out, "--dialect", "apertus-1") == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f'{src}:row 2: column "text": invalid UTF-8 at byte 1: invalid start byte'
    assert err[1] == f'{src}:row 3: "text" is null in this row'
    assert err[2].startswith(f"{src}:row 4: line 1, column ")
    assert len(read_json_lines(out)) == 1


def test_binary_columns_are_utf8_text(tmp_path, capsys):
    """Every column a command reads as a string may be binary, as "text" may: a binary
    "completion" and "prompt" used to fail every row ('"completion" must be a string,
    got an object'). A binary JSON column is UTF-8 too, whatever its first bytes
    (json.loads of bytes took FF FE for UTF-16)."""
    from .test_cli import expected_completion, sample_completions

    completions = sample_completions()[:3]
    table = pa.table({"completion": pa.array([c.encode() for c in completions] + [b"\xffx"],
                                             pa.binary()),
                      "prompt": pa.array([None] * 4, pa.large_binary())})
    src = write(table, tmp_path / "c.parquet")
    out = tmp_path / "out.jsonl"
    assert main("completions", src, "--dialect", "apertus-1.5", "-o", out) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f'{src}:row 4: column "completion": invalid UTF-8 at byte 1: invalid start byte')
    assert read_json_lines(out) == [expected_completion(c) for c in completions]
    messages = [{"role": "user", "content": "hi"}]
    table = pa.table({"messages": pa.array([json.dumps(messages).encode(), b'\xff\xfe"x"'],
                                           pa.binary()),
                      "date": pa.array([DATE.encode(), None], pa.binary())})
    src = write(table, tmp_path / "m.parquet")
    assert main("render", src, "-o", out) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f'{src}:row 2: column "messages": invalid UTF-8 at byte 1: invalid start byte')
    assert read_json_lines(out) == [render(messages, date=DATE)]


def test_a_string_column_that_is_not_utf8_says_so_as_a_binary_one_does(tmp_path, capsys):
    """A string column written by a tool that does not check its UTF-8 gave Python's
    own words, counted from 0 ('utf-8' codec can't decode byte 0xff in position 0),
    where a binary column gives the documented reason (CLI audit)."""
    offsets = pa.array([0, 2, 4], pa.int32()).buffers()[1]
    bad = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"ok\xff!")])
    src = write(pa.table({"completion": bad}), tmp_path / "c.parquet")
    assert main("completions", src, "-o", tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f'{src}:row 2: column "completion": invalid UTF-8 at byte 1: invalid start byte')


def test_a_timestamp_date_column_is_named_as_the_date_check_sees_it(tmp_path, capsys):
    """A ``date`` column holds dates; a timestamp there fails its row, naming the
    value. One in nanoseconds (a Nanoseconds, an int) was called a number (review)."""
    messages = json.dumps([{"role": "user", "content": "q"}])
    table = pa.table({"messages": [messages, messages],
                      "date": pa.array([1_700_000_000_123_456_789, 1_700_000_000_000_000_000],
                                       pa.timestamp("ns"))})
    src = write(table, tmp_path / "d.parquet")
    assert main("render", src, "-o", tmp_path / "out.jsonl") == 1
    assert capsys.readouterr().err.splitlines()[:2] == [
        f"{src}:row 1: date must be 'YYYY-MM-DD', got '2023-11-14T22:13:20.123456789'",
        f"{src}:row 2: date must be 'YYYY-MM-DD', got '2023-11-14T22:13:20'"]
    # times and durations too, one message for a whole column (review)
    for name, values in (("t", pa.array([3_600_000_000_001, 3_600_000_000_000], pa.time64("ns"))),
                         ("d", pa.array([1_000_000_500, 1_000_000_000], pa.duration("ns")))):
        src = write(pa.table({"messages": [messages, messages], "date": values}),
                    tmp_path / f"{name}.parquet")
        assert main("render", src, "-o", tmp_path / "out.jsonl") == 1
        lines = capsys.readouterr().err.splitlines()[:2]
        assert [line.rsplit(", got '", 1)[0] for line in lines] == [
            f"{src}:row {row}: date must be 'YYYY-MM-DD'" for row in (1, 2)], lines


def test_parse_lone_surrogates_stay_lossless_in_the_json_column(tmp_path, capsys):
    text = render([{"role": "user", "content": "x \ud800 y"}], dialect="apertus-1")
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps(text) + "\n")
    out = tmp_path / "out.parquet"
    assert main("parse", src, "-o", out, "--dialect", "apertus-1") == 0
    messages = json.loads(pq.read_table(out).column("messages")[0].as_py())
    assert messages == [{"role": "user", "content": "x \ud800 y"}]


def test_validate_parquet_mixes_conversations_and_texts(tmp_path, capsys):
    conv = json.dumps([{"role": "user", "content": "hi"}])
    text = render([{"role": "user", "content": "hi"}], dialect="apertus-1")
    table = pa.table({"messages": [conv, None, None, json.dumps([{"role": "bogus"}])],
                      "text": [None, text, None, None]})
    src = write(table, tmp_path / "v.parquet")
    assert main("validate", src, "--dialect", "apertus-1") == 1
    out = capsys.readouterr()
    assert out.out.splitlines()[0] == f'{src}:row 3: "messages" and "text" are null in this row'
    assert out.out.splitlines()[1].startswith(f"{src}:row 4: ")
    assert "checked 4, ok 2, failed 2 in " in out.err


# --------------------------------------------------------------------------- the writer and the converter


def test_output_row_groups_keep_order(tmp_path):
    errors = []
    with open(tmp_path / "g.parquet", "wb") as f:
        table = _parquet.ParquetOutput(f, "render", lambda row, why: errors.append(row),
                                       group_rows=3)
        for i in range(10):
            table.add(i + 1, (f"text {i}",))
        table.close()
    meta = pq.ParquetFile(tmp_path / "g.parquet").metadata
    assert meta.num_row_groups == 4 and table.written == 10 and not errors
    assert pq.read_table(tmp_path / "g.parquet").column("text").to_pylist() == [
        f"text {i}" for i in range(10)]


@pytest.mark.parametrize("kind, row", [
    ("render", ("x" * 1000,)),
    ("spans", ("x" * 1000, [[0, 1000]])),
    # the text is inside a list (parse's "messages"), a dict ("message" of --openai),
    # or a column after the first ("reasoning" of completions): only the rows counted
    ("parse", ([{"role": "user", "content": "x" * 1000}], "apertus-1")),
    ("openai", ({"role": "assistant", "content": None, "reasoning_content": "x" * 1000},)),
    ("completions", ("", "x" * 1000)),
])
def test_output_row_groups_end_at_the_characters_of_any_column(tmp_path, kind, row):
    """A row group ends once its rows hold group_chars characters of text, wherever the
    text is (so what the output holds in memory is bounded): 40 rows of 4.4 M
    characters of parse output used to make one row group (1.8 GB resident)."""
    with open(tmp_path / "g.parquet", "wb") as f:
        table = _parquet.ParquetOutput(f, kind, lambda row, why: None, group_chars=2500,
                                       keep=[("id", pa.int64())])
        for i in range(10):
            table.add_dict(i + 1, dict(zip(_parquet.column_names(kind), row)), (i,))
        table.close()
    meta = pq.ParquetFile(tmp_path / "g.parquet").metadata
    assert meta.num_rows == 10 and meta.num_row_groups == 4  # 3 rows (3,000 characters +) a group


def test_require_and_is_parquet_path(tmp_path):
    assert _parquet.is_parquet_path("a/b.PARQUET") and not _parquet.is_parquet_path("-")
    assert not _parquet.is_parquet_path(None) and not _parquet.is_parquet_path("x.jsonl")
    from apertus_fast._io import open_input

    with open_input(write(pa.table({"a": [1]}), tmp_path / "a.parquet")) as f:
        assert f.parquet
        with pytest.raises(InputError, match='no "text" column'):
            _parquet.ParquetInput(f).require("text")


# JSON-like values without nulls (Arrow cannot keep a null apart from a missing field)
# and without floats (Arrow unifies 1 and 2.5 as doubles).
_scalars = st.one_of(st.text(max_size=5), st.integers(-10**6, 10**6), st.booleans())
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(min_size=1, max_size=4), inner, max_size=4)),
    max_leaves=12)
# Records of one shape with optional fields (what a messages column holds): Arrow stores
# them as one struct type with the missing fields null.
_inner_record = st.fixed_dictionaries({}, optional={"x": st.booleans(), "y": st.text(max_size=3)})
_records = st.fixed_dictionaries({}, optional={
    "role": st.sampled_from(["user", "assistant", "tool"]),
    "content": st.text(max_size=5),
    "calls": st.lists(st.fixed_dictionaries({"name": st.text(max_size=3)},
                                            optional={"args": _inner_record}), max_size=3),
    "meta": _inner_record,
    "tags": st.lists(st.integers(0, 9), max_size=3),
})


def _typed(v):
    """A canonical form that keeps types apart (True is not 1) and ignores key order."""
    if isinstance(v, dict):
        return ("d", sorted((k, _typed(x)) for k, x in v.items()))
    if isinstance(v, list):
        return ("l", [_typed(x) for x in v])
    return (type(v).__name__, v)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(_values, min_size=1, max_size=4),
                 st.lists(st.lists(_records, max_size=4), min_size=1, max_size=4)))
def test_converter_gives_back_what_arrow_stored(values):
    """Whatever Arrow can store as one column, the converter turns back into the same
    values (up to key order, which a struct type fixes for all rows)."""
    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
        return
    convert = _parquet._converter(array.type) or (lambda v: v)
    back = [convert(v) for v in array.to_pylist()]
    assert [_typed(v) for v in back] == [_typed(v) for v in values]


def test_converter_round_trip_examples():
    for values in ([{"a": {"b": [1, 2]}, "c": "x"}, {"a": {"b": []}}],
                   [[{"role": "user"}], [{"role": "tool", "content": "x"}]]):
        array = pa.array(values)
        assert [_parquet._converter(array.type)(v) for v in array.to_pylist()] == values


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_interrupted_parquet_output_leaves_the_old_file_and_no_noise(tmp_path, monkeypatch,
                                                                     capsys, exc):
    src = write(json_table(sample_values() * 3), tmp_path / "c.parquet")
    out = tmp_path / "out.parquet"
    out.write_bytes(b"previous")
    calls = []

    def failing_render(*args, **kw):
        calls.append(1)
        if len(calls) == 40:
            raise exc("stop")
        return render(*args, **kw)

    monkeypatch.setattr(cli, "render", failing_render)
    monkeypatch.setattr(_parquet.ParquetOutput.__init__, "__defaults__", (5, 16 << 20))
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    if exc is KeyboardInterrupt:
        assert main("render", src, "-o", out, "--date", DATE) == 130
    else:
        with pytest.raises(RuntimeError):  # a renderer bug is not swallowed
            main("render", src, "-o", out, "--date", DATE)
    import gc

    gc.collect()  # a writer left open would write its footer to a closed file here
    assert not unraisable
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.parquet", "out.parquet"]


def test_read_parquet_raises_at_a_bad_json_value(tmp_path):
    src = write(pa.table({"messages": ["[]", "{oops"]}), tmp_path / "j.parquet")
    rows = _parquet.read_parquet(src)
    assert next(rows) == (1, {"messages": []})
    with pytest.raises(ValueError, match=r'j\.parquet: row 2: column "messages": invalid JSON'):
        next(rows)


# --------------------------------------------------------------------------- --keep


def test_keep_in_jsonl_records(tmp_path, capsys):
    lines = [{"id": "a", "source": 1, "messages": [{"role": "user", "content": "x"}]},
             [{"role": "user", "content": "a bare list"}],
             {"messages": [{"role": "user", "content": "no id"}]},
             {"id": "d", "messages": [{"role": "bogus"}]}]
    src = tmp_path / "k.jsonl"
    src.write_text("".join(json.dumps(v) + "\n" for v in lines))
    out = tmp_path / "out.jsonl"
    assert main("render", src, "-o", out, "--date", DATE, "--keep", "id", "--keep", "source,id",
                "--skip-errors") == 0
    records = read_json_lines(out)
    assert [list(r) for r in records] == [["id", "source", "text"]] * 3
    assert [(r["id"], r["source"]) for r in records] == [("a", 1), (None, None), (None, None)]
    assert [r["text"] for r in records] == [expected_render(v) for v in lines[:3]]
    assert main("render", src, "-o", out, "--date", DATE, "--keep", "id", "--spans",
                "--skip-errors") == 0
    first = read_json_lines(out)[0]
    assert list(first) == ["id", "text", "spans"] and first["id"] == "a"
    assert first["spans"] == [list(s) for s in render_with_spans(lines[0]["messages"], date=DATE).spans]


def test_keep_parquet_columns_with_their_arrow_types(tmp_path, capsys):
    meta_type = pa.struct([("source", pa.string()), ("score", pa.float64())])
    table = pa.table({
        "id": pa.array([10, 11, 12], pa.int64()),
        "meta": pa.array([{"source": "a", "score": None}, None, {"source": None, "score": 0.5}],
                         meta_type),
        "day": pa.array([dt.date(2026, 1, 1), dt.date(2026, 1, 2), None], pa.date32()),
        "messages": [json.dumps([{"role": "user", "content": "hi"}]),
                     json.dumps([{"role": "bogus"}]),
                     json.dumps([{"role": "user", "content": "ho"}])],
    })
    src = write(table, tmp_path / "k.parquet")
    out = tmp_path / "out.parquet"
    assert main("render", src, "-o", out, "--date", DATE, "--keep", "id,meta,day") == 1
    got = pq.read_table(out)
    assert got.schema.names == ["text", "id", "meta", "day"]
    assert [got.schema.field(c).type for c in ("id", "meta", "day")] == [
        pa.int64(), meta_type, pa.date32()]
    kept = table.take([0, 2]).select(["id", "meta", "day"])
    assert got.select(["id", "meta", "day"]).to_pylist() == kept.to_pylist()  # nulls as stored
    # to JSONL, the same values as JSON (dates as ISO text)
    jsonl = tmp_path / "out.jsonl"
    assert main("render", src, "-o", jsonl, "--date", DATE, "--keep", "day,meta",
                "--skip-errors") == 0
    assert [(r["day"], r["meta"]) for r in read_json_lines(jsonl)] == [
        ("2026-01-01", {"source": "a", "score": None}), (None, {"source": None, "score": 0.5})]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_kept_nanoseconds_stay_exact(tmp_path, capsys, jobs):
    """A nanosecond timestamp, time or duration whose nanoseconds are not 0 has no
    Python value (pyarrow refuses it: "Nanosecond resolution temporal type ... is not
    safely convertible"): such a row failed, even Parquet to Parquet. Now a Parquet
    output keeps the value as stored, and JSONL gets ISO text with nine digits."""
    ns = 1_700_000_000_123_456_789
    struct = pa.struct([("t", pa.timestamp("ns")), ("n", pa.int64())])
    table = pa.table({
        "completion": ["a", "b", "c"],
        "utc": pa.array([ns, ns - 789, None], pa.timestamp("ns", tz="UTC")),
        "zurich": pa.array([ns, 0, -1], pa.timestamp("ns", tz="Europe/Zurich")),
        "naive": pa.array([-1, 1_000, ns], pa.timestamp("ns")),
        "clock": pa.array([43_200_000_000_001, 0, None], pa.time64("ns")),
        "took": pa.array([1_000_000_500, -1, 86_400_000_000_000], pa.duration("ns")),
        "meta": pa.array([{"t": 5, "n": 1}, None, {"t": None, "n": 2}], struct),
        "steps": pa.array([[1, None, 2_000], [], None], pa.list_(pa.duration("ns"))),
        "at": pa.array([[("x", 7)], [], [("y", 8_000)]], pa.map_(pa.string(), pa.time64("ns"))),
    })
    src = write(table, tmp_path / "ns.parquet")
    kept = table.column_names[1:]
    out = tmp_path / "out.parquet"
    assert main("completions", src, "--keep", ",".join(kept), "-o", out, "-j", jobs) == 0
    assert pq.read_table(out).select(kept).equals(table.select(kept))
    out = tmp_path / "out.jsonl"
    assert main("completions", src, "--keep", ",".join(kept), "-o", out, "-j", jobs) == 0
    got = [{k: r[k] for k in kept} for r in read_json_lines(out)]
    assert got == [
        {"utc": "2023-11-14T22:13:20.123456789+00:00",
         "zurich": "2023-11-14T23:13:20.123456789+01:00",
         "naive": "1969-12-31T23:59:59.999999999",
         "clock": "12:00:00.000000001",
         "took": "0:00:01.000000500",
         "meta": {"t": "1970-01-01T00:00:00.000000005", "n": 1},
         "steps": ["0:00:00.000000001", None, "0:00:00.000002"],
         "at": [["x", "00:00:00.000000007"]]},
        {"utc": "2023-11-14T22:13:20.123456+00:00",  # (whole microseconds: as before)
         "zurich": "1970-01-01T01:00:00+01:00",
         "naive": "1970-01-01T00:00:00.000001",
         "clock": "00:00:00",
         "took": "-1 day, 23:59:59.999999999",
         "meta": None, "steps": [], "at": []},
        {"utc": None, "zurich": "1970-01-01T00:59:59.999999999+01:00",
         "naive": "2023-11-14T22:13:20.123456789",
         "clock": None, "took": "1 day, 0:00:00",
         "meta": {"t": None, "n": 2}, "steps": None, "at": [["y", "00:00:00.000008"]]}]
    rows = [r for _, r in _parquet.read_parquet(src, ["took"])]
    assert rows[1]["took"] == -1 and rows[1]["took"].text == "-1 day, 23:59:59.999999999"
    capsys.readouterr()


def strict_json(line: str):
    """json.loads that refuses NaN and Infinity, as JSON (and jq) does."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(line, parse_constant=refuse)


def test_kept_nan_and_infinity_are_null_in_jsonl(tmp_path, capsys):
    """JSON has no NaN or Infinity: they were written as bare NaN / Infinity, which jq
    rejects; now null, as JSON.stringify, orjson and pandas' to_json write them."""
    nan, inf = float("nan"), float("inf")
    table = pa.table({
        "score": pa.array([nan, inf, -inf, 1.5], pa.float64()),
        "scores": pa.array([[1.0, nan], [inf], [], None], pa.list_(pa.float32())),
        "meta": pa.array([{"w": nan, "n": 1}, None, {"w": 2.0, "n": None}, {"w": None, "n": 3}],
                         pa.struct([("w", pa.float64()), ("n", pa.int64())])),
        "m": pa.array([[("a", nan)], [], None, [("b", 0.5), ("b", 1.0)]],
                      pa.map_(pa.string(), pa.float64())),
        "raw": pa.array([b"ok", b"\xff!", None, "é".encode()], pa.binary()),
        "messages": [json.dumps([{"role": "user", "content": "hi"}])] * 4,
    })
    src = write(table, tmp_path / "nan.parquet")
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}.jsonl"
        assert main("render", src, "-o", out, "--date", DATE, "--keep", "score,scores,meta,m,raw",
                    "-j", jobs) == 0
        records = [strict_json(line) for line in out.read_text().splitlines()]
        assert [(r["score"], r["scores"], r["meta"]) for r in records] == [
            (None, [1.0, None], {"w": None, "n": 1}),
            (None, [None], None),
            (None, [], {"w": 2.0, "n": None}),
            (1.5, None, {"w": None, "n": 3})]
        # (as docs/cli.md says: a map as [key, value] pairs, keys repeated as stored;
        # binary as UTF-8 text, a byte that is not UTF-8 as a \xff escape)
        assert [r["m"] for r in records] == [[["a", None]], [], None, [["b", 0.5], ["b", 1.0]]]
        assert [r["raw"] for r in records] == ["ok", "\\xff!", None, "é"]
    # NaN in a JSONL line (json.loads reads it), kept by each command that keeps
    src = tmp_path / "nan.jsonl"
    text = render([{"role": "user", "content": "hi"}], dialect="apertus-1")
    src.write_text('{"id": NaN, "x": [Infinity, 1], "messages": [], "text": %s, "completion": "hi"}\n'
                   % json.dumps(text))
    out = tmp_path / "out.jsonl"
    for argv in (["render", "--date", DATE], ["parse", "--dialect", "apertus-1"], ["completions"]):
        assert main(argv[0], src, *argv[1:], "-o", out, "--keep", "id,x") == 0
        [record] = [strict_json(line) for line in out.read_text().splitlines()]
        assert (record["id"], record["x"]) == (None, [None, 1]), argv


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_kept_nan_and_infinity_are_null_in_parquet_json_text(tmp_path, capsys, jobs):
    """A kept JSONL column of values without a common type is JSON text in a Parquet
    output: NaN and ±Infinity there (1e400 is read as Infinity) were written as bare
    ``NaN`` / ``Infinity``, which is not JSON; now null, as a JSONL output writes."""
    text = render([{"role": "user", "content": "hi"}], dialect="apertus-1")
    src = tmp_path / "nan.jsonl"
    xs = ['"s"', "NaN", "[1, Infinity]", '{"a": [-Infinity, 1e400, 2.5]}', "1e400"]
    src.write_text("".join('{"x": %s, "messages": [], "text": %s, "completion": "hi"}\n'
                           % (x, json.dumps(text)) for x in xs))
    out = tmp_path / "out.parquet"
    for argv in (["render", "--date", DATE], ["parse", "--dialect", "apertus-1"], ["completions"]):
        assert main(argv[0], src, *argv[1:], "-o", out, "--keep", "x", "-j", jobs) == 0
        got = pq.read_table(out).column("x").to_pylist()
        assert got == ['"s"', "null", "[1, null]", '{"a": [null, null, 2.5]}', "null"], argv
        assert [strict_json(x) for x in got] == ["s", None, [1, None], {"a": [None, None, 2.5]},
                                                 None]
    capsys.readouterr()


def test_keep_from_jsonl_into_parquet_infers_types(tmp_path, capsys):
    msgs = [{"role": "user", "content": "hi"}]
    lines = [{"id": 1, "tag": None, "mixed": "a", "messages": msgs},
             {"id": 2, "mixed": 3, "messages": msgs},
             {"id": "three", "messages": msgs},  # in the next row group: not an int64
             {"id": 4, "messages": msgs}]
    src = tmp_path / "k.jsonl"
    src.write_text("".join(json.dumps(v) + "\n" for v in lines))
    out = tmp_path / "out.parquet"
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(_parquet.ParquetOutput.__init__, "__defaults__", (2, 16 << 20))
    try:
        assert main("render", src, "-o", out, "--date", DATE, "--keep", "id,tag,mixed") == 1
    finally:
        monkeypatch.undo()
    err = capsys.readouterr().err
    assert f'{src}:3: cannot write "id" to Parquet as int64: ' in err
    got = pq.read_table(out)
    assert [got.schema.field(c).type for c in ("id", "tag", "mixed")] == [
        pa.int64(), pa.string(), pa.string()]
    # "mixed" had no common type: JSON text; "tag" was null throughout: a string column
    assert got.select(["id", "tag", "mixed"]).to_pylist() == [
        {"id": 1, "tag": None, "mixed": '"a"'}, {"id": 2, "tag": None, "mixed": "3"},
        {"id": 4, "tag": None, "mixed": None}]


def test_keep_from_jsonl_a_value_arrow_would_change_fails_its_row(tmp_path, capsys):
    """pyarrow converts without a word: 1.5 into an int64 column became 1, a key that a
    struct column has no field for was dropped ({"b": "lost"} became {"a": null}), a
    string into a list column became its characters. Such a row now fails as the docs
    say; a value that Arrow holds as it is (3.0 in an int64 column, {} in a struct
    column) does not. A lone surrogate in the first row group fails its row and leaves
    the column a string column (it made the whole column JSON text), with -j too."""
    msgs = [{"role": "user", "content": "hi"}]
    lines = [{"id": "a", "n": 1, "meta": {"a": 1}, "tags": ["x"]},
             {"id": "bad-\udc00", "n": 2, "meta": {"a": 2}, "tags": []},   # (first group)
             {"id": "c", "n": 1.5},
             {"id": "d", "meta": {"a": 4, "b": "lost"}},
             {"id": "e", "tags": "xy"},
             {"id": "f", "n": 3.0, "meta": {}, "tags": None},
             {"id": "g", "tags": ["y", 7]}]
    src = tmp_path / "k.jsonl"
    src.write_text("".join(json.dumps({**v, "messages": msgs}) + "\n" for v in lines))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setattr(_parquet.ParquetOutput.__init__, "__defaults__", (2, 16 << 20))
    outputs = []
    try:
        for jobs in ("1", "2"):
            out = tmp_path / f"out{jobs}.parquet"
            assert main("render", src, "-o", out, "--date", DATE, "--keep", "id,n,meta,tags",
                        "-j", jobs) == 1
            err = capsys.readouterr().err.splitlines()
            assert err[:-1] == [
                f'{src}:2: cannot write "id" to Parquet: it holds a lone surrogate '
                "(Parquet strings are UTF-8)",
                f'{src}:3: cannot write "n" to Parquet as int64: 1.5 would be stored as 1',
                f'{src}:4: cannot write "meta" to Parquet as struct<a: int64>: '
                '{"a": 4, "b": "lost"} would be stored as {"a": 4}',
                f'{src}:5: cannot write "tags" to Parquet as list<item: string>: "xy" would be '
                'stored as ["x", "y"]',
                f'{src}:7: cannot write "tags" to Parquet as list<item: string>: Expected bytes, '
                "got a 'int' object"], err
            outputs.append(out.read_bytes())
    finally:
        monkeypatch.undo()
    assert outputs[0] == outputs[1]
    got = pq.read_table(tmp_path / "out1.parquet")
    assert [got.schema.field(c).type for c in ("id", "n", "meta", "tags")] == [
        pa.string(), pa.int64(), pa.struct([("a", pa.int64())]), pa.list_(pa.string())]
    assert got.select(["id", "n", "meta", "tags"]).to_pylist() == [
        {"id": "a", "n": 1, "meta": {"a": 1}, "tags": ["x"]},
        {"id": "f", "n": 3, "meta": {"a": None}, "tags": None}]


def _nested_lists(n, leaf):
    for _ in range(n):
        leaf = [leaf]
    return leaf


def _nested_objects(n, leaf):
    for _ in range(n):
        leaf = {"k": leaf}
    return leaf


def _nested_types(n, wrap, leaf):
    for _ in range(n):
        leaf = wrap(leaf)
    return leaf


@pytest.mark.parametrize("values, arrow_type", [
    ([1, 2.5], pa.float64()),                       # numbers: a double holds both
    ([{"a": 1}, {"b": "x"}], pa.struct([("a", pa.int64()), ("b", pa.string())])),
    ([{}, {}], None),                               # a struct of no field holds nothing more
    ([[], []], None),                               # nor does a list of nulls
    ([{"a": []}], None),
    (["a", 3], None),                               # no common type
    ([True, 1], None),
    (["x\udc00", "y"], pa.string()),                # (that row fails; the column is text)
    # as deep as pyarrow reads a Parquet schema (100 levels: a list takes two, a struct one)
    ([_nested_lists(49, 1)], _nested_types(49, pa.list_, pa.int64())),
    ([_nested_lists(50, 1)], None),
    ([_nested_objects(98, 1)], _nested_types(98, lambda t: pa.struct([("k", t)]), pa.int64())),
    ([_nested_objects(99, 1)], None),
])
def test_keep_type_inferred_from_the_first_row_group(values, arrow_type):
    """The type inferred for a kept column of JSON values: one that holds each of them
    as it is, or JSON text (None here)."""
    table = _parquet.ParquetOutput(None, "render", lambda row, reason: None,
                                   keep=[("k", None)])
    for i, v in enumerate(values):
        table.add(i + 1, ("t", v))
    table._infer(table._rows)
    assert table._types[1] == (pa.string() if arrow_type is None else arrow_type)
    assert (1 in table._json) == (arrow_type is None)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_kept_column_too_deep_for_parquet_readers_is_json_text(tmp_path, capsys, jobs):
    """A kept value nested deeper than a Parquet schema can be read back (50 lists in
    lists) is kept as JSON text: as 50 nested lists the output was written with exit
    status 0 and could not be read ("Parquet schema too deeply nested")."""
    deep = _nested_lists(50, 1)
    src = tmp_path / "d50.jsonl"
    src.write_text(json.dumps({"id": deep, "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    out = tmp_path / "out.parquet"
    assert main("render", src, "--keep", "id", "--date", DATE, "-o", out, "-j", jobs) == 0
    got = pq.read_table(out)
    assert got.schema.field("id").type == pa.string()
    assert json.loads(got.column("id")[0].as_py()) == deep
    assert main("validate", out) == 0


def test_keep_with_parse(tmp_path, capsys):
    text = render([{"role": "user", "content": "hi"}], dialect="apertus-1")
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"id": "x1", "text": text}) + "\n" + json.dumps(text) + "\n")
    out = tmp_path / "out.jsonl"
    assert main("parse", src, "-o", out, "--dialect", "apertus-1", "--keep", "id,text") == 0
    records = read_json_lines(out)
    assert [(r["id"], r["text"]) for r in records] == [("x1", text), (None, None)]
    assert list(records[0])[:3] == ["id", "text", "messages"]
    table = write(pa.table({"text": [text], "id": ["p1"]}), tmp_path / "t.parquet")
    assert main("parse", table, "-o", tmp_path / "out.parquet", "--dialect", "apertus-1",
                "--keep", "id") == 0
    got = pq.read_table(tmp_path / "out.parquet")
    assert got.schema.names[-1] == "id" and got.column("id").to_pylist() == ["p1"]
    raw = tmp_path / "t.txt"
    raw.write_text(text)
    assert main("parse", raw, "-o", out, "--dialect", "apertus-1", "--keep", "id") == 0
    assert read_json_lines(out)[0]["id"] is None


@pytest.mark.parametrize("argv, message", [
    (["render", "{src}", "--keep", "text"], '--keep text: the output has its own "text"'),
    (["render", "{src}", "--keep", "id,spans", "--spans"], '--keep spans: the output has its own'),
    (["render", "{src}", "--keep", "id", "--text"], "--keep needs records"),
    (["parse", "{src}", "--keep", "messages"], '--keep messages: the output has its own'),
    (["render", "{src}", "--keep", "idd"], 'has no column "idd" to keep (its columns: id, messages)'),
    (["render", "{src}", "--keep", "id,,x"], "expected comma-separated keys"),
])
def test_keep_usage_errors(tmp_path, capsys, argv, message):
    src = write(pa.table({"id": [1], "messages": ["[]"]}), tmp_path / "u.parquet")
    out = tmp_path / "out.jsonl"
    assert main(*[a.format(src=src) for a in argv], "-o", out) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_column_name_used_twice_is_exit_2(tmp_path, capsys):
    table = pa.Table.from_arrays([pa.array(["[]"]), pa.array(["[]"])], names=["messages", "messages"])
    src = write(table, tmp_path / "twice.parquet")
    assert main("render", src, "-o", tmp_path / "out.jsonl") == 2
    assert 'has 2 columns named "messages"' in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_completions_parquet_in_and_out(tmp_path, capsys):
    from .test_cli import expected_completion, sample_completions

    completions = sample_completions()
    table = pa.table({"id": list(range(len(completions))), "completion": completions,
                      "prompt": [None] * len(completions)})
    src = write(table, tmp_path / "c.parquet")
    jsonl = tmp_path / "out.jsonl"
    assert main("completions", src, "--dialect", "apertus-1.5", "--keep", "id", "-o", jsonl) == 0
    records = read_json_lines(jsonl)
    assert records == [{"id": i, **expected_completion(c)} for i, c in enumerate(completions)]
    out = tmp_path / "out.parquet"
    assert main("completions", src, "--dialect", "apertus-1.5", "--keep", "id", "-o", out) == 0
    got = pq.read_table(out)
    assert got.schema.names == ["content", "reasoning", "tool_calls", "tool_outputs",
                                "finish_reason", "closed", "messages", "warnings", "rest", "id"]
    assert got.schema.field("tool_calls").type == pa.list_(
        pa.struct([("name", pa.string()), ("arguments", pa.string())]))
    for row, record in zip(got.to_pylist(), records):
        row["messages"] = json.loads(row["messages"])
        assert row == {"warnings": None, "rest": None, **record}
    # OpenAI messages as JSON text
    assert main("completions", src, "--dialect", "apertus-1.5", "--openai", "-o", out) == 0
    got = pq.read_table(out)
    assert got.schema.names == ["message", "finish_reason"]
    assert [json.loads(m)["role"] for m in got.column("message").to_pylist()] == \
        ["assistant"] * len(completions)
    # a table without the column
    bad = write(pa.table({"text": ["x"]}), tmp_path / "bad.parquet")
    assert main("completions", bad, "-o", jsonl) == 2
    assert 'has no "completion" column (its columns: text)' in capsys.readouterr().err


def test_a_failing_row_leaves_the_others_json_text_as_it_is(tmp_path, capsys):
    """A row whose JSON text needs ASCII escapes (a lone surrogate) gets them; the other
    rows of its row group keep their non-ASCII characters (they used to be escaped too,
    depending on which rows shared the group)."""
    texts = [render([{"role": "user", "content": c}], dialect="apertus-1")
             for c in ("Grüezi, 你好", "x \ud800 y", "ça va")]
    src = tmp_path / "t.jsonl"
    src.write_text("".join(json.dumps(t) + "\n" for t in texts))
    out = tmp_path / "out.parquet"
    assert main("parse", src, "-o", out, "--dialect", "apertus-1") == 0
    column = pq.read_table(out).column("messages").to_pylist()
    assert "Grüezi, 你好" in column[0] and "ça va" in column[2]
    assert "\\ud800" in column[1]
    assert [json.loads(c)[0]["content"] for c in column] == ["Grüezi, 你好", "x \ud800 y", "ça va"]
