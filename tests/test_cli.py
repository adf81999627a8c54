"""The command line (``apertus-fast`` / ``python -m apertus_fast``) and its I/O helpers.

Most tests call ``cli.main(argv)`` in-process; a few run the real entry point in a
subprocess (stdin/stdout, no terminal, broken pipe). The parse/validate end-to-end tests
use the real parser; the plumbing tests of those commands use a tiny fake one.
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import apertus_fast
from apertus_fast import _io, cli
from apertus_fast._dialects import DEFAULT_DIALECT, DIALECTS
from apertus_fast._errors import ParseError, RenderError
from apertus_fast._render import render

from .fresh import default_stop_signals
from .oracle import ORACLE_MISSING, OracleError, oracle_render

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
CONVERSATIONS = SAMPLES / "conversations.jsonl"
MULTIMODAL = SAMPLES / "multimodal-1.5.jsonl"
RENDERED_15 = SAMPLES / "rendered-apertus-1.5.txt"
DATE = "2026-01-01"
ALL_DIALECTS = list(DIALECTS)
#: The source tree of the package under test, for the subprocesses.
PKG_ROOT = str(Path(apertus_fast.__file__).resolve().parent.parent)


# --------------------------------------------------------------------------- helpers


def sample_values(path=CONVERSATIONS):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def expected_render(value, dialect=DEFAULT_DIALECT, thinking=False, gen_prompt=False):
    """What the render command must produce for one input line (an independent
    restatement of the per-line rules: keys override flags)."""
    if isinstance(value, list):
        return render(value, dialect=dialect, enable_thinking=thinking,
                      add_generation_prompt=gen_prompt, date=DATE)
    def get(key, default):
        v = value.get(key)
        return default if v is None else v

    return render(
        value["messages"],
        dialect=dialect,
        tools=value.get("tools"),
        tools_text=value.get("tools_text"),
        enable_thinking=get("enable_thinking", thinking),
        add_generation_prompt=get("add_generation_prompt", gen_prompt),
        continue_assistant_message=get("continue_assistant_message", False),
        date=get("date", DATE),
        bos_token=get("bos_token", "<s>"),
    )


def run_cli(*args, input=None, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "apertus_fast", *map(str, args)],
        input=input, capture_output=True, env=env, cwd=REPO, timeout=timeout,
    )


def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read_json_lines(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def good_line(text="Grüezi mitenand! 👋"):
    return json.dumps({"messages": [{"role": "user", "content": text},
                                    {"role": "assistant", "content": "Hoi!"}]}, ensure_ascii=False)


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


# --------------------------------------------------------------------------- samples


@pytest.mark.oracle
@pytest.mark.skipif(ORACLE_MISSING is not None, reason=str(ORACLE_MISSING))
@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_samples_render_with_the_official_templates(dialect):
    """The sample corpus is valid in every dialect (checked with the oracle itself, so a
    renderer bug cannot hide a bad sample), and the multimodal one in apertus-1.5."""
    files = [CONVERSATIONS] + ([MULTIMODAL] if dialect == "apertus-1.5" else [])
    n = 0
    for path in files:
        for value in sample_values(path):
            messages = value if isinstance(value, list) else value["messages"]
            kw = {} if isinstance(value, list) else {
                k: value[k] for k in ("tools", "enable_thinking", "add_generation_prompt") if k in value}
            try:
                oracle_render(messages, dialect=dialect, date=DATE, **kw)
            except OracleError as exc:  # pragma: no cover - a broken sample
                pytest.fail(f"{path.name}: {value if isinstance(value, list) else value['id']}: {exc}")
            n += 1
    assert n >= 30


def test_samples_are_varied():
    values = sample_values()
    assert 25 <= len(values) <= 40
    dumped = CONVERSATIONS.read_text(encoding="utf-8")
    for needle in ('"tool_calls"', '"tool_outputs"', '"thoughts"', '"role": "tool"',
                   '"tools"', '"parts"', '"enable_thinking": true', '"add_generation_prompt": true',
                   "display_answers", "Grazia", "Grüezi", "é", "🇨🇭"):
        assert needle in dumped, needle
    assert any(isinstance(v, list) for v in values), "a bare-list line"
    assert RENDERED_15.read_text(encoding="utf-8").startswith("<s><|system_start|>")


# --------------------------------------------------------------------------- render


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_render_samples_subprocess(dialect):
    proc = run_cli("render", CONVERSATIONS, "--dialect", dialect, "--date", DATE)
    assert proc.returncode == 0, proc.stderr
    values = sample_values()
    out = proc.stdout.decode("utf-8").splitlines()
    assert len(out) == len(values)
    assert [json.loads(line) for line in out] == [expected_render(v, dialect) for v in values]
    err = proc.stderr.decode("utf-8")
    assert f"rendered {len(values)}, failed 0, skipped blank 0" in err
    # stderr is not a terminal here: no progress bar, no control characters at all
    assert "\r" not in err and "\x1b" not in err


def test_render_to_file_in_process(tmp_path, capsys):
    out = tmp_path / "rendered.jsonl"
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE]) == 0
    assert read_json_lines(out) == [expected_render(v) for v in sample_values()]
    assert sorted(os.listdir(tmp_path)) == ["rendered.jsonl"]
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"rendered {len(sample_values())}, failed 0, skipped blank 0 in " in captured.err


def test_render_multimodal_sample():
    proc = run_cli("render", MULTIMODAL, "--dialect", "apertus-1.5", "--date", DATE)
    assert proc.returncode == 0, proc.stderr
    values = sample_values(MULTIMODAL)
    assert [json.loads(x) for x in proc.stdout.decode().splitlines()] == \
        [expected_render(v, "apertus-1.5") for v in values]
    assert "<|image|>" in proc.stdout.decode() and "<|audio|>" in proc.stdout.decode()


def test_render_reports_render_errors_with_message_index(capsys):
    """In the reference dialect every multimodal line fails, each reported with its line
    number and the index of the offending message."""
    assert cli.main(["render", str(MULTIMODAL), "--date", DATE]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    values = sample_values(MULTIMODAL)
    for lineno, value in enumerate(values, 1):
        with pytest.raises(RenderError) as info:
            expected_render(value)
        assert info.value.message_index is not None
        assert f"{MULTIMODAL}:{lineno}: {info.value}\n" in captured.err
        assert f"message {info.value.message_index}: " in str(info.value)
    assert f"rendered 0, failed {len(values)}, skipped blank 0" in captured.err


def bad_corpus(tmp_path):
    lines = [
        good_line("first"),                                                  # 1 ok
        '{"messages": [{"role": "user", "content": "unterminated"}',         # 2 invalid JSON
        "",                                                                  # 3 blank
        "42",                                                                # 4 wrong shape
        '{"messages": [{"role": "robot", "content": "beep"}]}',              # 5 RenderError
        '{"conversation": []}',                                              # 6 no "messages"
        '{"messages": [{"role": "user", "content": "x"}], "enable_thinking": "yes"}',  # 7
        "   \t",                                                             # 8 blank
        good_line("last"),                                                   # 9 ok
    ]
    return write_lines(tmp_path / "bad.jsonl", lines)


@pytest.mark.parametrize("line, reason", [
    # a cut-off line: json would stop at its newline (line 2, column 1)
    (b'{"messages": [\n', "invalid JSON at column 15: the line ends before its JSON value does (Expecting value)"),
    (b'{"messages": [', "invalid JSON at column 15: the line ends before its JSON value does (Expecting value)"),
    (b'{"messages": [\r\n', "invalid JSON at column 15: the line ends before its JSON value does (Expecting value)"),
    (b'{"text": "abc\n', "invalid JSON at column 14: the line ends inside a string (Invalid control character)"),
    # the file's last line, without its newline: json said where the string starts
    # ("invalid JSON at column 10: Unterminated string starting")
    (b'{"text": "abc', "invalid JSON at column 14: the line ends inside a string "
                      "(Unterminated string starting at column 10)"),
    (b'{"text": "a\tb"}\n', "invalid JSON at column 12: Invalid control character '\\t' in a string"),
    (b'{"messages": [}\n', "invalid JSON at column 15: Expecting value"),
    (b'{"a": 1} x\n', "invalid JSON at column 10: Extra data"),
    # JSONL is UTF-8: json.loads(bytes) took these for UTF-16 ("invalid UTF-8 at byte
    # 13: truncated data") and UTF-16-BE ("Unterminated string")
    (b'\xff\xfe"bad utf8"\n', "invalid UTF-8 at byte 1: invalid start byte"),
    (b'"\x00"\n', "invalid JSON at column 2: Invalid control character '\\x00' in a string"),
])
def test_a_json_error_says_the_column_on_the_line(tmp_path, capsys, line, reason):
    """The column is where the line goes wrong, also when it is cut off (json would
    have said line 2, column 1: its own newline), in one process and with -j 2."""
    src = tmp_path / "cut.jsonl"
    src.write_bytes(good_line("first").encode() + b"\n" + line)
    for jobs in ("1", "2"):
        assert cli.main(["render", str(src), "-o", str(tmp_path / "o.jsonl"), "-j", jobs, "--date", DATE]) == 1
        assert f"{src}:2: {reason}\n" in capsys.readouterr().err


def test_render_bad_lines_are_reported_and_skipped(tmp_path, capsys):
    src = bad_corpus(tmp_path)
    out = tmp_path / "out.jsonl"
    assert cli.main(["render", str(src), "-o", str(out), "--date", DATE]) == 1
    err = capsys.readouterr().err
    with pytest.raises(RenderError) as info:
        render([{"role": "robot", "content": "beep"}], date=DATE)
    expected = [
        f"{src}:2: invalid JSON at column ",
        f"{src}:4: expected an object with a \"messages\" key or a list of messages, got a number",
        f"{src}:5: {info.value}",
        f"{src}:6: expected an object with a \"messages\" key",
        f'{src}:7: "enable_thinking" must be true or false, got "yes"',
    ]
    lines = err.splitlines()
    for prefix in expected:
        assert any(line.startswith(prefix) for line in lines), (prefix, err)
    assert f"{src}:5: message 0: " in err
    assert f"{src}:3:" not in err and f"{src}:8:" not in err
    assert "rendered 2, failed 5, skipped blank 2" in err
    # the good lines are written (the file is complete for what succeeded)
    assert read_json_lines(out) == [expected_render(json.loads(good_line("first"))),
                                    expected_render(json.loads(good_line("last")))]


def test_render_skip_errors_exits_0(tmp_path, capsys):
    src = bad_corpus(tmp_path)
    assert cli.main(["render", str(src), "--skip-errors", "--date", DATE]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert "failed 5" in captured.err and f"{src}:5: message 0:" in captured.err


def test_render_max_errors(tmp_path, capsys):
    src = write_lines(tmp_path / "x.jsonl", ["nope"] * 5 + [good_line()])
    assert cli.main(["render", str(src), "--max-errors", "2", "--date", DATE]) == 1
    err = capsys.readouterr().err
    assert err.count("invalid JSON") == 2
    assert "failed 5" in err and "3 more problems not shown" in err


def test_render_quiet(tmp_path, capsys):
    src = bad_corpus(tmp_path)
    assert cli.main(["render", str(src), "-q", "--date", DATE]) == 1
    err = capsys.readouterr().err
    assert "rendered" not in err and f"{src}:2:" in err


def test_render_stdin_stdout_subprocess():
    data = CONVERSATIONS.read_bytes()
    proc = run_cli("render", "-", "-o", "-", "--dialect", "apertus-1", "--date", DATE, input=data)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x) for x in proc.stdout.decode().splitlines()] == \
        [expected_render(v, "apertus-1") for v in sample_values()]
    bad = run_cli("render", "-", input=b'{"messages": 1}\n\n[]\nnull\n')
    assert bad.returncode == 1
    err = bad.stderr.decode()
    assert "<stdin>:1: messages must be a list" in err or "<stdin>:1: " in err
    assert "<stdin>:4: expected an object" in err
    assert "skipped blank 1" in err


def test_render_stdin_in_process(monkeypatch, capsys):
    data = (good_line("a") + "\n" + good_line("b") + "\n").encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert cli.main(["render", "-", "--date", DATE]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(x) for x in out] == [expected_render(json.loads(good_line(t))) for t in "ab"]


def test_render_gzip_in_and_out(tmp_path, capsys):
    gz_in = tmp_path / "corpus.jsonl.gz"
    gz_in.write_bytes(gzip.compress(CONVERSATIONS.read_bytes()))
    out = tmp_path / "rendered.jsonl.gz"
    assert cli.main(["render", str(gz_in), "-o", str(out), "--date", DATE]) == 0
    texts = [json.loads(x) for x in gzip.decompress(out.read_bytes()).decode().splitlines()]
    assert texts == [expected_render(v) for v in sample_values()]
    # gzip is recognised by its content, whatever the name
    renamed = tmp_path / "corpus.data"
    renamed.write_bytes(gz_in.read_bytes())
    assert cli.main(["render", str(renamed), "--date", DATE]) == 0
    assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == texts
    # and the output is reproducible byte for byte (no timestamp in the gzip header)
    out2 = tmp_path / "again.jsonl.gz"
    assert cli.main(["render", str(gz_in), "-o", str(out2), "--date", DATE]) == 0
    assert out2.read_bytes() == out.read_bytes()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_output_name_ending_in_gz_in_any_case_is_gzipped(tmp_path, capsys, jobs):
    """``-o X.GZ`` is gzipped as ``-o X.PARQUET`` is Parquet: the suffix in any case (it
    was written uncompressed), in one process and by the workers alike."""
    out = tmp_path / "rendered.JSONL.GZ"
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE, "-j", jobs]) == 0
    texts = [json.loads(x) for x in gzip.decompress(out.read_bytes()).decode().splitlines()]
    assert texts == [expected_render(v) for v in sample_values()]
    assert _io.is_gzip_path("a.Gz") and not _io.is_gzip_path("a.gzip") and not _io.is_gzip_path("-")
    capsys.readouterr()


def test_render_flags_and_per_line_overrides(tmp_path, capsys):
    msgs = [{"role": "user", "content": "Salut"}]
    lines = [
        json.dumps({"messages": msgs}),
        json.dumps({"messages": msgs, "enable_thinking": False, "add_generation_prompt": False}),
        json.dumps({"messages": msgs, "enable_thinking": None}),  # null: the flag applies
        json.dumps(msgs),
    ]
    src = write_lines(tmp_path / "f.jsonl", lines)
    assert cli.main(["render", str(src), "--thinking", "--generation-prompt", "--date", DATE,
                     "--dialect", "apertus-1.5"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    on = render(msgs, dialect="apertus-1.5", enable_thinking=True, add_generation_prompt=True, date=DATE)
    off = render(msgs, dialect="apertus-1.5", date=DATE)
    assert out == [on, off, on, on]
    assert "Deliberation: enabled" in on and on.endswith("<|assistant_start|>")


def test_render_date(tmp_path, capsys):
    src = write_lines(tmp_path / "f.jsonl", [good_line()])
    assert cli.main(["render", str(src), "--date", "2031-12-24"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "Current date: 2031-12-24" in out


def test_render_per_line_keys(tmp_path, capsys):
    msgs = [{"role": "user", "content": "Grüessech"}]
    lines = [
        {"messages": msgs, "date": "2030-05-06"},
        {"messages": msgs, "bos_token": ""},
        {"messages": msgs, "tools_text": "// t\ntype t = () => any;"},
        {"messages": msgs + [{"role": "assistant", "content": "Sal"}], "continue_assistant_message": True},
        {"messages": msgs, "dialect": "apertus-1.5"},
        {"messages": msgs, "date": None, "bos_token": None, "dialect": None, "tool_names": ["x"]},
    ]
    src = write_lines(tmp_path / "f.jsonl", [json.dumps(x) for x in lines])
    assert cli.main(["render", str(src), "--date", DATE]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert out == [
        render(msgs, date="2030-05-06"),
        render(msgs, bos_token="", date=DATE),
        render(msgs, tools_text="// t\ntype t = () => any;", date=DATE),
        render(lines[3]["messages"], dialect="apertus-format-reference", continue_assistant_message=True,
               date=DATE),
        render(msgs, dialect="apertus-1.5"),  # no --dialect: the line's dialect
        render(msgs, date=DATE),
    ]
    assert out[0] != out[5] and out[1] != out[5] and out[4] != out[5]
    # an explicit --dialect wins over the line's "dialect" (converting between dialects)
    assert cli.main(["render", str(src), "--date", DATE, "--dialect", "apertus-1"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert out[4] == render(msgs, dialect="apertus-1", date=DATE)


def test_render_bad_per_line_keys(tmp_path, capsys):
    msgs = [{"role": "user", "content": "x"}]
    lines = [
        {"messages": msgs, "dialect": "apertus-7"},
        {"messages": msgs, "date": 20260101},
        {"messages": msgs, "date": "01/01/2026"},
        {"messages": msgs, "tools": [], "tools_text": "x", "continue_assistant_message": 1},
        {"messages": msgs, "tools": [{"name": "t", "description": "d"}], "tools_text": "x"},
        {"messages": msgs, "dialect": ["apertus-1"]},   # (unhashable: it was a traceback)
        {"messages": msgs, "dialect": {"name": "apertus-1"}},
        {"messages": msgs, "dialect": 5},
    ]
    src = write_lines(tmp_path / "f.jsonl", [json.dumps(x) for x in lines])
    assert cli.main(["render", str(src)]) == 1
    err = capsys.readouterr().err
    with pytest.raises(RenderError) as bad_date:
        render(msgs, date="01/01/2026")
    with pytest.raises(RenderError) as both:
        render(msgs, tools=lines[4]["tools"], tools_text="x")
    assert f'{src}:1: unknown "dialect" "apertus-7"; known: ' in err
    assert f'{src}:2: "date" must be a string, got a number' in err
    assert f"{src}:3: {bad_date.value}" in err
    assert f'{src}:4: "continue_assistant_message" must be true or false, got 1' in err
    assert f"{src}:5: {both.value}" in err
    assert f'{src}:6: "dialect" must be a string, got a list' in err
    assert f'{src}:7: "dialect" must be a string, got an object' in err
    assert f'{src}:8: "dialect" must be a string, got a number' in err
    assert "rendered 0, failed 8" in err


def test_render_ignores_other_keys_and_extra_fields(tmp_path, capsys):
    line = json.dumps({"id": 7, "source": "x", "messages": [{"role": "user", "content": "hi"}]})
    src = write_lines(tmp_path / "f.jsonl", [line])
    assert cli.main(["render", str(src), "--date", DATE]) == 0
    assert json.loads(capsys.readouterr().out) == render([{"role": "user", "content": "hi"}], date=DATE)


def test_render_text_mode(capsys):
    assert cli.main(["render", str(CONVERSATIONS), "--text", "--date", DATE]) == 0
    out = capsys.readouterr().out
    assert out == "".join(expected_render(v) + "\n" for v in sample_values())


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_render_spans_mode(tmp_path, dialect, capsys):
    """--spans: {"text", "spans"} a line, as render_with_spans gives them; the output
    is parse input, and bad lines are reported as in the other modes."""
    from apertus_fast import render_with_spans

    values = sample_values()
    src = write_lines(tmp_path / "f.jsonl", [json.dumps(v) for v in values] + ["[1]"])
    out = tmp_path / "spans.jsonl"
    assert cli.main(["render", str(src), "--spans", "--dialect", dialect, "--date", DATE,
                     "-o", str(out), "--skip-errors"]) == 0
    assert f"{src}:{len(values) + 1}:" in capsys.readouterr().err
    lines = read_json_lines(out)
    assert len(lines) == len(values)
    for value, line in zip(values, lines):
        assert list(line) == ["text", "spans"]
        assert line["text"] == expected_render(value, dialect)
        messages = value if isinstance(value, list) else value["messages"]
        kw = {} if isinstance(value, list) else {
            k: value[k] for k in ("tools", "enable_thinking", "add_generation_prompt") if k in value}
        r = render_with_spans(messages, dialect=dialect, date=DATE, **kw)
        assert line["spans"] == [list(span) for span in r.spans]
    assert any(line["spans"] for line in lines)
    # rendered text without its messages: parse it, render the reading with spans
    parsed, again = tmp_path / "parsed.jsonl", tmp_path / "again.jsonl"
    assert cli.main(["parse", str(out), "--dialect", dialect, "-o", str(parsed)]) == 0
    assert cli.main(["render", str(parsed), "--spans", "-o", str(again)]) == 0
    assert read_json_lines(again) == lines


def test_render_spans_lone_surrogates_and_usage(tmp_path, capsys):
    src = write_lines(tmp_path / "f.jsonl", [json.dumps([
        {"role": "user", "content": "a\ud800b"}, {"role": "assistant", "content": "c\udfffd"}])])
    out = tmp_path / "out.jsonl"
    assert cli.main(["render", str(src), "--spans", "-o", str(out), "--date", DATE]) == 0
    raw = out.read_bytes()
    raw.decode("utf-8")  # valid UTF-8: the surrogates are escaped
    line = json.loads(raw)
    start, end = line["spans"][0]
    assert line["text"][start:end] == "c\udfffd"
    capsys.readouterr()
    assert cli.main(["render", str(src), "--spans", "--text"]) == 2
    assert "not allowed with" in capsys.readouterr().err


def test_render_lone_surrogates_stay_valid_json(tmp_path, capsys):
    src = write_lines(tmp_path / "f.jsonl", ['{"messages": [{"role": "user", "content": "a\\ud800b"}]}'])
    out = tmp_path / "out.jsonl"
    assert cli.main(["render", str(src), "-o", str(out), "--date", DATE]) == 0
    raw = out.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    assert json.loads(raw) == render([{"role": "user", "content": "a\ud800b"}], date=DATE)


def test_render_invalid_utf8_line(tmp_path, capsys):
    src = tmp_path / "f.jsonl"
    src.write_bytes(b'{"messages": [{"role": "user", "content": "\xff"}]}\n' + good_line().encode() + b"\n")
    assert cli.main(["render", str(src), "--date", DATE]) == 1
    captured = capsys.readouterr()
    assert f"{src}:1: invalid UTF-8" in captured.err
    assert len(captured.out.splitlines()) == 1


# --------------------------------------------------------------------------- atomic output


def _interrupt_after(monkeypatch, n, exc):
    calls = {"n": 0}

    def flaky_render(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > n:
            raise exc
        return render(*args, **kwargs)

    monkeypatch.setattr(cli, "render", flaky_render)
    return calls


def test_atomic_output_survives_keyboard_interrupt(tmp_path, monkeypatch, capsys):
    out = tmp_path / "rendered.jsonl"
    out.write_text("previous content\n")
    before = sorted(os.listdir(tmp_path))
    calls = _interrupt_after(monkeypatch, 5, KeyboardInterrupt())
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE]) == 130
    assert calls["n"] == 6
    assert out.read_text() == "previous content\n"
    assert sorted(os.listdir(tmp_path)) == before  # no temp file left behind
    assert "interrupted" in capsys.readouterr().err


def test_atomic_output_survives_a_crash(tmp_path, monkeypatch):
    out = tmp_path / "rendered.jsonl"
    out.write_text("previous content\n")
    _interrupt_after(monkeypatch, 3, RuntimeError("renderer bug"))
    with pytest.raises(RuntimeError, match="renderer bug"):
        cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE])
    assert out.read_text() == "previous content\n"
    assert os.listdir(tmp_path) == ["rendered.jsonl"]


@pytest.mark.parametrize("sig, status", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129), ("SIGQUIT", 131),
                                         ("nohup SIGHUP", 0)])
def test_signal_mid_stream_leaves_previous_output(tmp_path, sig, status):
    """A real Ctrl-C / job-scheduler SIGTERM / hang-up / Ctrl-\\ on the real entry point:
    exit 128 + the signal (130 / 143 / 129 / 131),
    previous OUTPUT untouched, temp file removed. Started under nohup (SIGHUP ignored),
    the command keeps ignoring a hang-up and finishes."""
    import signal
    import time

    def start():
        default_stop_signals()
        if sig.startswith("nohup"):
            signal.signal(signal.SIGHUP, signal.SIG_IGN)

    big = tmp_path / "big.jsonl"
    big.write_bytes(CONVERSATIONS.read_bytes() * 3000)
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / "rendered.jsonl"
    out.write_text("previous content\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "apertus_fast", "render", str(big), "-o", str(out),
                             "--date", DATE], stderr=subprocess.PIPE, env=env, preexec_fn=start)
    deadline = time.monotonic() + 60
    while len(os.listdir(outdir)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # wait until the temp file exists: rendering has started
    assert proc.poll() is None, "finished before the signal; make the input bigger"
    proc.send_signal(getattr(signal, sig.split()[-1]))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert b"Traceback" not in err
    if status:
        assert out.read_text() == "previous content\n"
    else:
        assert len(out.read_text().splitlines()) == 3000 * len(sample_values())
    assert os.listdir(outdir) == ["rendered.jsonl"]


@pytest.fixture
def stop_signals_at_default():
    """Ctrl-C and SIGTERM as in a terminal while the test runs (the command handles
    them only then), whatever the test runner set."""
    import signal

    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
                signal.SIGTERM: signal.signal(signal.SIGTERM, signal.SIG_DFL)}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_once_the_output_is_committed_changes_nothing(tmp_path, monkeypatch, capsys, sig,
                                                               stop_signals_at_default):
    """A Ctrl-C or SIGTERM right after the output was renamed into place (raised there,
    in this process, as the kernel would deliver it) no longer makes the command an
    interrupted one: it finishes with its status and summary. It exited 130/143 saying
    "interrupted" with the new output in place. One that comes before the rename (here
    in the fsync) still stops it, the output untouched."""
    import signal

    out = tmp_path / "rendered.jsonl"
    want = tmp_path / "want.jsonl"
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(want), "--date", DATE]) == 0
    summary = capsys.readouterr().err
    real_replace, real_fsync = os.replace, os.fsync

    def replace(src, dst):
        real_replace(src, dst)
        if dst == str(out):
            signal.raise_signal(getattr(signal, sig))  # (its handler runs before this returns)

    monkeypatch.setattr(os, "replace", replace)
    out.write_text("previous content\n")
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE]) == 0
    assert out.read_bytes() == want.read_bytes()
    err = capsys.readouterr().err
    assert err.startswith("rendered ") and err.split(" in ")[0] == summary.split(" in ")[0]

    def fsync(fd):
        real_fsync(fd)
        signal.raise_signal(getattr(signal, sig))

    monkeypatch.setattr(os, "fsync", fsync)
    out.write_text("previous content\n")
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE]) == (
        130 if sig == "SIGINT" else 143)
    assert out.read_text() == "previous content\n"
    assert sorted(os.listdir(tmp_path)) == ["rendered.jsonl", "want.jsonl"]
    assert ("interrupted" if sig == "SIGINT" else "terminated") in capsys.readouterr().err


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_after_the_commit_does_not_kill_the_program(tmp_path, sig):
    """The real entry point (python -m apertus_fast), signalled right after the output
    was renamed into place and again as the process exits (after main has returned):
    exit 0, the new output in place. It exited 130/143, or died of the signal (-2/-15)
    once main had restored the default handlers."""
    code = ("import atexit, os, runpy, signal, sys\n"
            f"sig = signal.{sig}\n"
            "real = os.replace\n"
            "def replace(src, dst):\n"
            "    real(src, dst)\n"
            "    signal.raise_signal(sig)\n"
            "os.replace = replace\n"
            "atexit.register(signal.raise_signal, sig)\n"
            "sys.argv[0] = 'apertus-fast'\n"
            "runpy.run_module('apertus_fast', run_name='__main__')\n")
    out = tmp_path / "rendered.jsonl"
    out.write_text("previous content\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code, "render", str(CONVERSATIONS), "-o", str(out),
                           "--date", DATE, "-q"], capture_output=True, env=env, timeout=120,
                          preexec_fn=default_stop_signals)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""
    assert len(out.read_text().splitlines()) == len(sample_values())
    assert os.listdir(tmp_path) == ["rendered.jsonl"]


@pytest.mark.parametrize("command, status, message", [
    ("render - <&-", 2, "cannot read <stdin>: standard input is closed"),
    ("render - -j 2 <&-", 2, "cannot read <stdin>: standard input is closed"),
    ("render {sample} >&-", 2, "cannot write <stdout>: standard output is closed"),
    ("validate {sample} >&-", 2, "cannot write <stdout>: standard output is closed"),
    ("dialects >&-", 2, "cannot write <stdout>: standard output is closed"),
    ("completions {two} >&-", 2, "cannot write <stdout>: standard output is closed"),
    ("completions {two} -j 2 >&-", 2, "cannot write <stdout>: standard output is closed"),
    ("completions {two} 1</dev/null", 2, "cannot write <stdout>: Bad file descriptor"),
    ("completions {two} -j 2 1</dev/null", 2, "cannot write <stdout>: Bad file descriptor"),
    ("render {sample} -o {out} 2>&-", 0, ""),
])
def test_a_closed_standard_stream_is_an_unreadable_input_or_unwritable_output(tmp_path, command, status,
                                                                               message):
    """Started with stdin, stdout or stderr closed (`<&-`, `>&-`, `2>&-`), the command
    says so and exits 2 like any unreadable input or unwritable output (it raised an
    AttributeError on None before); with stderr closed it works and says nothing. A
    stdout open for reading only is an unwritable output as well. Both name the output
    `<stdout>`, as stdin is `<stdin>` (it said `cannot write: ...`)."""
    import shlex

    out = tmp_path / "out.jsonl"
    two = tmp_path / "two.jsonl"
    two.write_text('"ok"\n"yo"\n')
    line = (f"{shlex.quote(sys.executable)} -m apertus_fast "
            + command.format(sample=shlex.quote(str(CONVERSATIONS)), out=shlex.quote(str(out)),
                             two=shlex.quote(str(two))))
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == status, run.stderr
    assert "Traceback" not in run.stderr
    assert message in run.stderr
    if "-o" in command:
        assert len(read_json_lines(out)) == len(sample_values())


def test_atomic_output_without_previous_file(tmp_path, monkeypatch):
    out = tmp_path / "new.jsonl"
    _interrupt_after(monkeypatch, 2, KeyboardInterrupt())
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE]) == 130
    assert os.listdir(tmp_path) == []


def test_atomic_output_replaces_and_keeps_permissions(tmp_path):
    out = tmp_path / "rendered.jsonl"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "-q", "--date", DATE]) == 0
    assert len(read_json_lines(out)) == len(sample_values())
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["rendered.jsonl"]


def test_atomic_output_new_file_mode_follows_umask(tmp_path):
    old = os.umask(0o027)
    try:
        with _io.atomic_output(tmp_path / "x") as f:
            f.write(b"data")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "x").st_mode) == 0o640
    assert (tmp_path / "x").read_bytes() == b"data"


def test_atomic_output_unit(tmp_path):
    target = tmp_path / "t.bin"
    target.write_bytes(b"keep")
    with pytest.raises(ValueError):
        with _io.atomic_output(target) as f:
            f.write(b"partial")
            assert len(os.listdir(tmp_path)) == 2  # the temp file is next to the target
            raise ValueError("boom")
    assert target.read_bytes() == b"keep"
    assert os.listdir(tmp_path) == ["t.bin"]


def _interrupt_when_created(monkeypatch, directory, exc):
    """Make ``os.open`` raise ``exc`` right after it has created a file in ``directory``:
    where a pending Ctrl-C is raised when the signal lands while the temp file is being
    created (the real-signal test below hit this window on a loaded CI machine)."""
    real_open = os.open
    hits = []

    def open_then_interrupt(name, flags, *args, **kwargs):
        fd = real_open(name, flags, *args, **kwargs)
        if os.path.dirname(os.path.abspath(name)) == str(directory) and flags & os.O_CREAT:
            os.close(fd)
            hits.append(name)
            raise exc
        return fd

    monkeypatch.setattr(os, "open", open_then_interrupt)
    return hits


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), cli._Terminated(15)])
def test_atomic_output_interrupted_as_the_temp_file_appears(tmp_path, monkeypatch, exc):
    target = tmp_path / "t.bin"
    target.write_bytes(b"keep")
    hits = _interrupt_when_created(monkeypatch, tmp_path, exc)
    with pytest.raises(type(exc)):
        with _io.atomic_output(target) as f:
            f.write(b"never")
    assert len(hits) == 1  # the temp file did exist
    assert target.read_bytes() == b"keep"
    assert os.listdir(tmp_path) == ["t.bin"]


def test_cli_interrupted_as_the_temp_file_appears(tmp_path, monkeypatch, capsys):
    out = tmp_path / "rendered.jsonl"
    out.write_text("previous content\n")
    hits = _interrupt_when_created(monkeypatch, tmp_path, KeyboardInterrupt())
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out), "--date", DATE]) == 130
    assert len(hits) == 1
    assert out.read_text() == "previous content\n"
    assert os.listdir(tmp_path) == ["rendered.jsonl"]
    assert "interrupted" in capsys.readouterr().err


def test_atomic_output_interrupted_as_open_returns(tmp_path, monkeypatch):
    """The file object exists but was never bound to a name: it is closed as the
    exception unwinds, and the temp file is still removed."""
    real_open = open
    opened = []

    def open_then_interrupt(*args, **kwargs):
        opened.append(real_open(*args, **kwargs))
        raise KeyboardInterrupt

    monkeypatch.setattr(_io, "open", open_then_interrupt, raising=False)
    target = tmp_path / "t.bin"
    with pytest.raises(KeyboardInterrupt):
        with _io.atomic_output(target) as f:
            f.write(b"never")
    opened[0].close()
    assert os.listdir(tmp_path) == []


def test_atomic_output_never_removes_a_file_it_did_not_create(tmp_path, monkeypatch):
    """A temp name that is taken is somebody else's file: another name is tried, and the
    taken one is left alone, also when writing then fails."""
    names = iter([b"\0" * 6, b"\0" * 6, b"\1" * 6])
    monkeypatch.setattr(_io.os, "urandom", lambda n: next(names))
    target = tmp_path / "t.bin"
    theirs = tmp_path / ".t.bin.000000000000.tmp"
    theirs.write_bytes(b"theirs")
    with pytest.raises(ValueError):
        with _io.atomic_output(target) as f:
            assert sorted(os.listdir(tmp_path)) == [".t.bin.000000000000.tmp", ".t.bin.010101010101.tmp"]
            raise ValueError("boom")
    assert theirs.read_bytes() == b"theirs"
    assert os.listdir(tmp_path) == [theirs.name]


def test_atomic_output_gives_up_when_every_name_is_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(_io.os, "urandom", lambda n: b"\0" * n)
    (tmp_path / ".t.bin.000000000000.tmp").write_bytes(b"theirs")
    with pytest.raises(FileExistsError, match="no free temporary file name"):
        with _io.atomic_output(tmp_path / "t.bin"):
            pass
    assert os.listdir(tmp_path) == [".t.bin.000000000000.tmp"]


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_atomic_output_does_not_follow_a_planted_symlink(tmp_path, monkeypatch):
    monkeypatch.setattr(_io.os, "urandom", lambda n: b"\0" * n)
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    (tmp_path / ".t.bin.000000000000.tmp").symlink_to(victim)
    with pytest.raises(FileExistsError):
        with _io.atomic_output(tmp_path / "t.bin"):
            pass
    assert victim.read_bytes() == b"untouched"


def test_unwritable_output_is_exit_2(tmp_path, capsys):
    out = tmp_path / "missing-dir" / "out.jsonl"
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    # the output is named, not the temp file nobody asked for
    assert f"cannot write {out}: No such file or directory" in err and ".tmp" not in err


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_atomic_output_through_a_symlink_replaces_its_target(tmp_path):
    target = tmp_path / "data" / "out.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    with _io.atomic_output(link) as f:
        f.write(b"new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(target.parent)) == ["out.jsonl"]  # the temp file was beside the target
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "data" / "made.jsonl")
    with _io.atomic_output(dangling) as f:
        f.write(b"made")
    assert dangling.is_symlink() and (tmp_path / "data" / "made.jsonl").read_bytes() == b"made"


def test_a_loop_of_symbolic_links_is_an_unwritable_output(tmp_path, capsys):
    """`-o a` where a -> b -> a: no file to replace (the link was replaced by a regular
    file before); reported by its name, exit 2, the links left as they were."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(OSError) as info:
        with _io.atomic_output(tmp_path / "a") as f:
            f.write(b"never")
    assert info.value.errno == errno.ELOOP
    assert cli.main(["render", str(CONVERSATIONS), "-o", str(tmp_path / "a"), "--date", DATE]) == 2
    assert f"cannot write {tmp_path / 'a'}: Too many levels of symbolic links" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_atomic_output_writes_into_a_named_pipe(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # the reading end is opened first (without blocking), so opening the pipe for
    # writing returns at once and the data waits in the pipe's buffer
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with _io.atomic_output(fifo) as f:
            f.write(b"through the pipe\n")
        got = os.read(reader, 1024)
    finally:
        os.close(reader)
    assert got == b"through the pipe\n"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a pipe, not a regular file
    assert os.listdir(tmp_path) == ["pipe"]


def test_atomic_output_writes_into_a_device(tmp_path):
    """``-o /dev/null`` (as root: the system's node) must stay a device. Tested on a
    node of our own where the system lets us make one, else on /dev/null itself after
    checking that it would be written in place."""
    node = tmp_path / "null"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (OSError, AttributeError):
        assert _io._writes_in_place("/dev/null")
        node = Path("/dev/null")
    assert _io._writes_in_place(node)
    with _io.atomic_output(node) as f:
        f.write(b"gone")
    assert stat.S_ISCHR(os.lstat(node).st_mode)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc")
def test_atomic_output_to_a_descriptor_name_writes_through_it(tmp_path):
    """``-o /dev/stdout`` with stdout redirected to a file: the data goes to the open
    descriptor (as ``> file`` set it up), and the file is not replaced behind it."""
    target = tmp_path / "redirected"
    with open(target, "wb") as held:
        inode = os.fstat(held.fileno()).st_ino
        link = tmp_path / "stdout"
        link.symlink_to(f"/proc/self/fd/{held.fileno()}")
        assert _io._writes_in_place(link)
        assert _io._writes_in_place(f"/dev/fd/{held.fileno()}")
        with _io.atomic_output(link) as f:
            f.write(b"via the descriptor")
    assert target.read_bytes() == b"via the descriptor"
    assert os.stat(target).st_ino == inode
    assert sorted(os.listdir(tmp_path)) == ["redirected", "stdout"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc")
def test_atomic_output_to_a_descriptor_name_keeps_its_mode_and_offset(tmp_path):
    """A descriptor open for appending, or at an offset, is written as it is open: the
    name opened anew with "wb" truncated the file it is open on."""
    target = tmp_path / "log"
    target.write_bytes(b"kept\n")
    fd = os.open(target, os.O_WRONLY | os.O_APPEND)
    try:
        with _io.atomic_output(f"/dev/fd/{fd}") as f:
            f.write(b"appended\n")
        with _io.atomic_output(f"/proc/self/fd/{fd}") as f:
            f.write(b"again\n")
    finally:
        os.close(fd)
    assert target.read_bytes() == b"kept\nappended\nagain\n"
    fd = os.open(target, os.O_RDWR)  # (`1<>file`: no truncation, written from offset 5)
    try:
        os.lseek(fd, 5, os.SEEK_SET)
        with _io.atomic_output(f"/proc/{os.getpid()}/fd/{fd}") as f:
            f.write(b"APPENDED")
        assert os.lseek(fd, 0, os.SEEK_CUR) == 13  # (one open file: the offset moved on)
    finally:
        os.close(fd)
    assert target.read_bytes() == b"kept\nAPPENDED\nagain\n"
    assert _io._own_descriptor("/proc/1/fd/1") is None  # another process's: opened by name
    assert _io._own_descriptor(tmp_path / "log") is None


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc")
@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("name, redirect", [("/dev/stdout", ">>"), ("/dev/fd/3", "3>>"),
                                             ("{link}", ">>")])
def test_output_to_a_descriptor_appends_after_an_append_redirection(tmp_path, jobs, name, redirect):
    """``-o /dev/stdout >> log`` appends to the log, as the command without ``-o`` does
    (it used to wipe what was there), also with --jobs, whose workers' part files are
    copied into the output (here every block's output is handed over as one)."""
    import shlex

    link = tmp_path / "out-link"
    link.symlink_to("/dev/stdout")
    log = tmp_path / "log.jsonl"
    log.write_text('{"note": "keep me"}\n')
    code = ("import sys; from apertus_fast import cli; cli.BATCH_BYTES = 1; "
            "cli.HANDOFF_BYTES = 0; sys.exit(cli.main(sys.argv[1:]))")
    argv = [sys.executable, "-c", code, "render", str(CONVERSATIONS), "--date", DATE, "-q",
            "-j", str(jobs), "-o", name.format(link=link)]
    line = " ".join(map(shlex.quote, argv)) + f" {redirect} {shlex.quote(str(log))}"
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    for _ in range(2):
        run = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env,
                             timeout=120)
        assert run.returncode == 0, run.stderr
    expected = [expected_render(v) for v in sample_values()]
    assert read_json_lines(log) == [{"note": "keep me"}, *expected, *expected]


def test_regular_files_and_new_names_are_replaced_atomically(tmp_path):
    (tmp_path / "f").write_bytes(b"")
    assert not _io._writes_in_place(tmp_path / "f")
    assert not _io._writes_in_place(tmp_path / "new")


def test_unreadable_input_is_exit_2(tmp_path, capsys):
    assert cli.main(["render", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "nope.jsonl" in err


def test_corrupt_gzip_is_exit_2_and_leaves_no_output(tmp_path, capsys):
    src = tmp_path / "bad.jsonl.gz"
    src.write_bytes(gzip.compress(CONVERSATIONS.read_bytes())[:-20])  # truncated
    out = tmp_path / "out.jsonl"
    assert cli.main(["render", str(src), "-o", str(out), "--date", DATE]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl.gz"]


@pytest.mark.parametrize("command", ["render", "parse", "validate", "completions"])
@pytest.mark.parametrize("head, reason", [
    (5, "Compressed file ended before the end-of-stream marker was reached"),  # header cut
    (b"\x1f\x8bhello\n", "Compressed file ended before the end-of-stream marker was reached"),
    (b"\x1f\x8b\x09abcdefgh", "Unknown compression method"),
])
def test_a_gzip_header_cut_off_or_corrupt_is_exit_2_not_an_empty_file(tmp_path, capsys, command,
                                                                       head, reason):
    # (the check for a gzipped Parquet file peeked past the header and dropped the
    # error, so the input read as empty: exit 0, "checked 0")
    data = gzip.compress(CONVERSATIONS.read_bytes())[:head] if isinstance(head, int) else head
    src = tmp_path / "bad.jsonl.gz"
    src.write_bytes(data)
    out = tmp_path / "out.jsonl"
    args = [command, str(src)] + (["-o", str(out)] if command != "validate" else [])
    assert cli.main(args) == 2
    assert f"error: cannot read {src}: {reason}" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl.gz"]


# --------------------------------------------------------------------------- progress


def test_progress_bar_on_a_terminal(monkeypatch):
    monkeypatch.setattr(_io, "PROGRESS_INTERVAL", 0.0)  # redraw at every line
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert cli.main(["render", str(CONVERSATIONS), "--date", DATE]) == 0
    err = tty.getvalue()
    assert "\r" in err and "lines/s" in err and "%" in err
    # cleared before the summary
    head, summary = err.rsplit("\r\x1b[K", 1)
    assert summary.startswith("rendered 31, failed 0")


def test_progress_bar_clears_itself_before_error_lines(monkeypatch, tmp_path):
    monkeypatch.setattr(_io, "PROGRESS_INTERVAL", 0.0)
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    src = write_lines(tmp_path / "f.jsonl", [good_line(), "oops", good_line()])
    cli.main(["render", str(src), "--date", DATE])
    assert f"\r\x1b[K{src}:2: invalid JSON" in tty.getvalue()


def test_no_progress_bar_when_not_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(_io, "PROGRESS_INTERVAL", 0.0)
    assert cli.main(["render", str(CONVERSATIONS), "--date", DATE]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err


def test_no_progress_flag(monkeypatch):
    monkeypatch.setattr(_io, "PROGRESS_INTERVAL", 0.0)
    tty = FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert cli.main(["render", str(CONVERSATIONS), "--no-progress", "--date", DATE]) == 0
    assert "\r" not in tty.getvalue()


def _cli_on_a_terminal(tmp_path, *args):
    """Run the CLI with stdin, stdout and stderr on one pseudo-terminal, as in an
    interactive shell; returns what the terminal showed."""
    import pty
    import select

    program = ("import sys; from apertus_fast import _io, cli\n"
               "_io.PROGRESS_INTERVAL = 0.0\n"
               f"sys.exit(cli.main({list(args)!r}))\n")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", program], stdin=slave, stdout=slave, stderr=slave,
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": PKG_ROOT})
    os.close(slave)
    shown = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(60)
    os.close(master)
    assert proc.returncode == 0, shown.decode("utf-8", "replace")
    return shown.decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_no_progress_bar_in_the_middle_of_output_on_the_same_terminal(tmp_path):
    shown = _cli_on_a_terminal(tmp_path, "render", str(CONVERSATIONS), "--date", DATE)
    assert "<|user_start|>" in shown and "rendered 31, failed 0" in shown
    assert "lines/s" not in shown.split("rendered 31")[0] and "\x1b[K" not in shown
    # the control: with the output in a file, the same terminal shows the bar
    shown = _cli_on_a_terminal(tmp_path, "render", str(CONVERSATIONS), "--date", DATE, "-o", "out.jsonl")
    assert "lines/s" in shown and "\x1b[K" in shown


def test_progress_throttles_redraws():
    now = [0.0]
    stream = FakeTTY()
    p = _io.Progress(stream, total=1000, position=lambda: 500, interval=0.1, clock=lambda: now[0])
    for i, t in enumerate([0.01, 0.05, 0.099, 0.1, 0.15, 0.19, 0.2, 0.35, 0.36], 1):
        now[0] = t
        p.update(i)
    assert p.redraws == 3  # at 0.1, 0.2 and 0.35
    assert "50.0%" in stream.getvalue() and "7 lines" in stream.getvalue()
    p.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    p.update(100)
    assert p.redraws == 3


def test_progress_disabled_when_not_a_tty():
    stream = io.StringIO()
    p = _io.Progress(stream, interval=0.0)
    for i in range(10):
        p.update(i)
    p.close()
    assert not p.enabled and stream.getvalue() == ""


# --------------------------------------------------------------------------- general


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"apertus-fast {apertus_fast.__version__}")


def test_dialects_command(capsys):
    assert cli.main(["dialects"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ALL_DIALECTS
    assert all(len(line.split(None, 1)[1]) > 20 for line in out)
    assert sum("(default)" in line for line in out) == 1


@pytest.mark.parametrize("argv", [
    ["render", "x.jsonl", "--dialect", "apertus-9"],
    ["render", "x.jsonl", "--date", "01.01.2026"],
    ["render"],
    ["frobnicate"],
    [],
    ["parse", "x", "--format", "yaml"],
    ["render", "x", "--max-errors", "-1"],
])
def test_usage_errors_exit_2(argv, capsys):
    assert cli.main(argv) == 2
    assert capsys.readouterr().err


@pytest.mark.parametrize("head", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\n", b"\xef\xbb\xbf \r\n\n"])
@pytest.mark.parametrize("command", ["render", "validate"])
def test_a_byte_order_mark_alone_on_the_first_line_is_a_blank_line(tmp_path, capsys, head, command):
    """Editors write a BOM, also into a file that is otherwise empty or starts with an
    empty line: that line is blank (skipped and counted), not invalid JSON."""
    for body in (b"", CONVERSATIONS.read_bytes()):
        src = tmp_path / "bom.jsonl"
        src.write_bytes(head + body if body else head)
        for jobs in ("1", "2"):
            argv = [command, str(src), "-j", jobs]
            if command == "render":
                argv += ["-o", str(tmp_path / "out.jsonl"), "--date", DATE]
            assert cli.main(argv) == 0, capsys.readouterr().err
            err = capsys.readouterr().err
            # (a BOM right before a JSON line is no line of its own)
            blanks = head.count(b"\n") or (0 if body else 1)
            assert "failed 0" in err and f"skipped blank {blanks}" in err, err
            if command == "render":
                assert len(read_json_lines(tmp_path / "out.jsonl")) == (len(sample_values()) if body else 0)


def test_an_empty_output_name_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """`-o ''` was written as a temp file in the parent folder and reported by that
    file's name."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["render", str(CONVERSATIONS), "-o", ""]) == 2
    assert "argument -o/--output: expected a file name, or - for stdout; got an empty string" \
        in capsys.readouterr().err
    assert os.listdir(tmp_path) == [] and not [n for n in os.listdir(tmp_path.parent) if n.endswith(".tmp")]


@pytest.mark.parametrize("command", [[], ["render"], ["parse"], ["validate"], ["completions"]])
def test_help(command, capsys):
    assert cli.main(command + ["--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: apertus-fast" in out
    if command:
        assert "examples:" in out


def test_entry_point_subprocess():
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.decode().startswith("apertus-fast ")
    proc = run_cli("render", "/nonexistent/dir/x.jsonl")
    assert proc.returncode == 2 and b"cannot read" in proc.stderr
    assert b"Traceback" not in proc.stderr


def test_broken_pipe_is_quiet(tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(CONVERSATIONS.read_bytes() * 300)
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "apertus_fast", "render", str(big), "--date", DATE],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert b"Traceback" not in err and b"Exception ignored" not in err


def broken_pipe_inputs(tmp_path) -> dict:
    """An input for each command that makes it write to stderr many times (problems,
    warnings, the summary): (argv after the command, its exit status)."""
    bad = bad_corpus(tmp_path).read_text(encoding="utf-8") * 40
    conversations = tmp_path / "conversations.jsonl"
    conversations.write_text(bad, encoding="utf-8")
    texts = [json.dumps(expected_render(v)) for v in sample_values()] + ['"no rendered text"']
    rendered = write_lines(tmp_path / "rendered.jsonl", texts * 40)
    completions = tmp_path / "completions.jsonl"
    completions.write_bytes((SAMPLES / "completions-1.5.jsonl").read_bytes() * 40)
    return {"render": ([conversations, "--date", DATE], 1),
            "parse": ([rendered], 1),
            "completions": ([completions, "--dialect", "apertus-1.5"], 0),
            "validate": ([conversations], 1)}


def run_with_a_broken_stderr(argv, out=None, *, stdout_too=False, stderr=None) -> int:
    """Run the command line on a stderr pipe whose reader is gone before it starts (as
    after `2>&1 | head` stopped reading): each write to it breaks. Its stdout is the
    same pipe (``stdout_too``), the file ``out``, or /dev/null. ``stderr``: a
    descriptor to use instead of the pipe. Returns the exit status."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        stdout = write_end if stdout_too else (subprocess.DEVNULL if out is None else out)
        proc = subprocess.Popen([sys.executable, "-m", "apertus_fast", *map(str, argv)],
                                stdout=stdout, stderr=write_end if stderr is None else stderr,
                                env=env, cwd=REPO)
    finally:
        os.close(write_end)
    return proc.wait(timeout=120)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("command", ["render", "parse", "completions", "validate"])
def test_a_broken_stderr_pipe_is_a_closed_stderr(tmp_path, command, jobs):
    """Whoever reads stderr stopped (`... -o out.jsonl 2>&1 | head`): the problems,
    warnings and summary go nowhere from then on, and the command ends as it would
    have, with its own status and the whole output, as with a closed stderr. It used to
    stop with 141, and with -j 1 without writing the output (the previous one stayed).
    A failed flush of stderr at exit would make the status 120."""
    args, status = broken_pipe_inputs(tmp_path)[command]
    argv = [command, *args, "-j", jobs]
    reference = run_cli(*argv, *(() if command == "validate" else ("-o", tmp_path / "ref.jsonl")))
    assert reference.returncode == status, reference.stderr
    # (validate writes only its summary there)
    assert reference.stderr.count(b"\n") > (0 if command == "validate" else 40)
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    if command == "validate":  # (its problems are its output, on stdout)
        with open(out, "wb") as f:
            assert run_with_a_broken_stderr(argv, f) == status
        assert out.read_bytes() == reference.stdout
    else:
        assert run_with_a_broken_stderr([*argv, "-o", out]) == status
        assert out.read_bytes() == (tmp_path / "ref.jsonl").read_bytes()


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("command", ["render", "parse", "completions", "validate"])
def test_an_unwritable_stderr_is_a_closed_stderr(tmp_path, command, jobs):
    """A stderr that is open but cannot be written: open for reading only (`2</dev/null`;
    a shell script run with `2>&-` has its own file there, read-only), or on a full
    device (/dev/full: ENOSPC). As with a broken pipe, the messages go nowhere and the
    command ends with its own status and the whole output; it stopped with a traceback
    (exit status 1, which said nothing, as the traceback went nowhere), the output
    not written."""
    args, status = broken_pipe_inputs(tmp_path)[command]
    argv = [command, *args, "-j", jobs]
    reference = run_cli(*argv, *(() if command == "validate" else ("-o", tmp_path / "ref.jsonl")))
    assert reference.returncode == status, reference.stderr
    assert reference.stderr
    kinds = [(os.devnull, os.O_RDONLY)]
    if os.path.exists("/dev/full"):
        kinds.append(("/dev/full", os.O_WRONLY))
    for path, flags in kinds:
        out = tmp_path / "out.jsonl"
        out.write_text("previous\n")
        fd = os.open(path, flags)
        try:
            if command == "validate":  # (its problems are its output, on stdout)
                with open(out, "wb") as f:
                    assert run_with_a_broken_stderr(argv, f, stderr=fd) == status, path
                assert out.read_bytes() == reference.stdout, path
            else:
                assert run_with_a_broken_stderr([*argv, "-o", out], stderr=fd) == status, path
                assert out.read_bytes() == (tmp_path / "ref.jsonl").read_bytes(), path
            if command == "validate":  # (nothing on stdout: only the summary fails)
                assert run_with_a_broken_stderr(["validate", CONVERSATIONS, "-j", jobs],
                                                stderr=fd) == 0, path
        finally:
            os.close(fd)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_broken_pipe_on_stdout_and_stderr_is_141(tmp_path, jobs):
    """`... 2>&1 | head` with the output on stdout: stderr breaks first (the first bad
    line's report), and the output's write ends the command as a broken stdout does."""
    args, _ = broken_pipe_inputs(tmp_path)["render"]
    assert run_with_a_broken_stderr(["render", *args, "-j", jobs], stdout_too=True) == 141


# --------------------------------------------------------------------------- _io helpers


def test_read_and_write_jsonl(tmp_path):
    values = [{"a": 1}, ["x", "ü"], "s\ud800"]
    path = tmp_path / "v.jsonl.gz"
    assert _io.write_jsonl(path, values) == 3
    assert [v for _, v in _io.read_jsonl(path)] == values
    plain = tmp_path / "p.jsonl"
    plain.write_text('{"a": 1}\n\n[1]\n{oops\n')
    it = _io.read_jsonl(plain)
    assert next(it) == (1, {"a": 1})
    assert next(it) == (3, [1])
    with pytest.raises(_io.JsonlError) as info:
        next(it)
    assert info.value.lineno == 4 and str(info.value).startswith(f"{plain}:4: invalid JSON")


def test_json_line():
    assert _io.json_line({"k": "Grüezi"}) == '{"k": "Grüezi"}\n'.encode()
    assert json.loads(_io.json_line("\udc80")) == "\udc80"


def test_input_file_size_and_position(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b"a\nbb\n")
    with _io.open_input(p) as f:
        assert f.size == 5 and f.position() == 0
        assert list(f) == [b"a\n", b"bb\n"]
        assert f.position() == 5
    with pytest.raises(_io.InputError):
        _io.open_input(tmp_path / "missing")


# --------------------------------------------------------------------------- parse / validate plumbing (fake parser)


class FakeParsed:
    def __init__(self, text, warnings=()):
        self.text = text
        self.warnings = list(warnings)

    def to_dict(self):
        return {"messages": [{"role": "user", "content": self.text}],
                "enable_thinking": False, "add_generation_prompt": False}


def fake_parse(text, *, dialect=DEFAULT_DIALECT, strict=True):
    """Fails at the first "BAD" (strict) or recovers from it with a warning. Raw files
    come as bytes, as parse() takes them: invalid UTF-8 is its error."""
    if isinstance(text, bytes):
        from apertus_fast._lex import utf8_found

        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError.at(text, exc.start, "invalid UTF-8", expected="valid UTF-8",
                                found=utf8_found(text, exc)) from None
    assert isinstance(text, str) and dialect in DIALECTS
    i = text.find("BAD")
    if i >= 0:
        if strict:
            raise ParseError.at(text, i, "unexpected text", expected="<|user_end|>", found="'BAD'")
        return FakeParsed(text, [f"dropped 'BAD' at offset {i}"])
    return FakeParsed(text)


@pytest.fixture
def fake_parser(monkeypatch):
    monkeypatch.setattr(cli, "_load_parse", lambda: fake_parse)


def test_parse_plumbing_jsonl(tmp_path, fake_parser, capsys):
    src = write_lines(tmp_path / "r.jsonl", [
        json.dumps("one"),                      # 1 ok
        json.dumps({"text": "two", "id": 2}),   # 2 ok
        "",                                     # 3 blank
        json.dumps("line1\nxxBAD"),             # 4 parse error on line 2 of the text
        "42",                                   # 5 wrong shape
        json.dumps({"text": 5}),                # 6 wrong shape
        "{nope",                                # 7 invalid JSON
    ])
    out = tmp_path / "parsed.jsonl"
    assert cli.main(["parse", str(src), "-o", str(out)]) == 1
    assert read_json_lines(out) == [fake_parse("one").to_dict(), fake_parse("two").to_dict()]
    err = capsys.readouterr().err
    assert (f"{src}:4: line 2, column 3 (offset 8): unexpected text; expected <|user_end|>; "
            f"found 'BAD'; near 'line1\\nxxBAD'") in err
    assert f'{src}:5: expected a JSON string or an object with a "text" key, got a number' in err
    assert f'{src}:6: "text" must be a string, got a number' in err
    assert f"{src}:7: invalid JSON" in err
    assert "parsed 2, failed 4, skipped blank 1" in err
    assert cli.main(["parse", str(src), "--skip-errors", "-q"]) == 0


def test_parse_plumbing_raw(tmp_path, fake_parser, capsys):
    src = tmp_path / "conv.txt"
    src.write_text("<s>first line\nsecond\nthird BAD\n", encoding="utf-8")
    assert cli.main(["parse", str(src)]) == 1
    err = capsys.readouterr().err
    # for raw input the reported LINE is the line in the file
    assert f"{src}:3: line 3, column 7 (offset 27): unexpected text" in err
    src.write_text("<s>all\ngood\n", encoding="utf-8")
    assert cli.main(["parse", str(src)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(x) for x in out] == [fake_parse("<s>all\ngood\n").to_dict()]


def test_parse_plumbing_lenient_warnings(tmp_path, fake_parser, capsys):
    src = write_lines(tmp_path / "r.jsonl", [json.dumps("ok"), json.dumps("xBAD")])
    assert cli.main(["parse", str(src), "--lenient"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 2
    assert f"{src}:2: warning: dropped 'BAD' at offset 1" in captured.err
    assert "parsed 2 (1 warning), failed 0" in captured.err


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_summary_says_one_in_the_singular(tmp_path, capsys, jobs):
    """One completion, one warning: "read 1 completion (1 warning)" (it said "read 1
    completions (1 warnings)")."""
    src = write_lines(tmp_path / "c.jsonl", [json.dumps("<think>a")])
    assert cli.main(["completions", str(src), "--dialect", "apertus-1.5", "-o",
                     str(tmp_path / "out.jsonl"), "-j", jobs]) == 0
    assert "read 1 completion (1 warning), failed 0," in capsys.readouterr().err
    write_lines(src, [json.dumps("<think>a"), json.dumps("<think>b")])
    assert cli.main(["completions", str(src), "--dialect", "apertus-1.5", "-o",
                     str(tmp_path / "out.jsonl"), "-j", jobs]) == 0
    assert "read 2 completions (2 warnings), failed 0," in capsys.readouterr().err


def test_parse_format_detection_and_forcing(tmp_path, fake_parser, capsys):
    src = tmp_path / "x.txt"
    src.write_text('"looks like json"\n', encoding="utf-8")
    assert cli.main(["parse", str(src)]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["content"] == "looks like json"
    assert cli.main(["parse", str(src), "--format", "raw"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["content"] == '"looks like json"\n'
    raw = tmp_path / "raw.txt"
    raw.write_text("\n\n<s>text", encoding="utf-8")  # leading blank lines, then not JSON
    assert cli.main(["parse", str(raw)]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["content"] == "\n\n<s>text"
    assert cli.main(["parse", str(raw), "--format", "jsonl"]) == 1
    assert f"{raw}:3: invalid JSON" in capsys.readouterr().err
    # a JSONL file whose first line is broken (cut off, or not quite JSON) is still
    # JSONL: that line is one bad line and the others are read, as --format jsonl reads them
    for first in ('{"text": "<s><|sys', '"<s> unterminated', "[1, 2", ' {"text": 5,'):
        broken = tmp_path / "broken.jsonl"
        broken.write_text(first + "\n" + json.dumps("ok") + "\n", encoding="utf-8")
        assert cli.main(["parse", str(broken)]) == 1
        captured = capsys.readouterr()
        assert f"{broken}:1: invalid JSON" in captured.err, captured.err
        assert "parsed 1, failed 1" in captured.err
        assert [json.loads(x)["messages"][0]["content"] for x in captured.out.splitlines()] == ["ok"]


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
@pytest.mark.parametrize("command", ["parse", "validate"])
def test_parse_raw_invalid_utf8(tmp_path, fake_parser, capsys, bom, command):
    """After a BOM too: the BOM is no text (it was counted in the file but not in the
    offset, so the error was placed 3 bytes early, on line 1, with the BOM in the
    excerpt)."""
    src = tmp_path / "x.txt"
    src.write_bytes(bom + b"<s>ok\nbad \xff here")
    assert cli.main([command, str(src)]) == 1
    captured = capsys.readouterr()
    assert (f"{src}:2: line 2, column 5 (offset 10): invalid UTF-8; expected valid UTF-8; "
            "found invalid start byte: ff; near '<s>ok\\nbad \ufffd here'\n") in captured.err + captured.out


@pytest.mark.parametrize("command", ["parse", "validate"])
def test_raw_input_counts_bytes_and_reports_the_first_error(tmp_path, capsys, command):
    """A raw file was decoded before parsing: structural errors counted characters,
    invalid UTF-8 bytes, and a bad byte hid an earlier structural error (parse audit).
    It is parsed as bytes, as parse(bytes) is: one unit, the first error."""
    src = tmp_path / "r.txt"
    src.write_bytes("é<|user_end|>".encode())
    assert cli.main([command, "--dialect", "apertus-1.5", str(src)]) == 1
    first = "".join(capsys.readouterr())   # (validate reports on stdout)
    assert f"{src}:1: line 1, column 3 (offset 2): missing system block" in first, first
    src.write_bytes("é<|user_end|>".encode() + b"\xff")
    assert cli.main([command, "--dialect", "apertus-1.5", str(src)]) == 1
    second = "".join(capsys.readouterr())
    assert f"{src}:1: line 1, column 3 (offset 2): missing system block" in second, second


def test_validate_plumbing(tmp_path, fake_parser, capsys):
    src = write_lines(tmp_path / "v.jsonl", [
        good_line(),                                          # 1 ok (rendered)
        json.dumps("fine"),                                   # 2 ok (parsed)
        '[{"role": "robot", "content": "x"}]',                # 3 render error
        json.dumps({"text": "BAD"}),                          # 4 parse error
        "",                                                   # 5 blank
        "true",                                               # 6 wrong shape
        "{",                                                  # 7 invalid JSON
    ])
    assert cli.main(["validate", str(src)]) == 1
    captured = capsys.readouterr()
    problems = captured.out.splitlines()
    assert [p.split(": ", 1)[0] for p in problems] == [f"{src}:{n}" for n in (3, 4, 6, 7)]
    assert problems[0].startswith(f"{src}:3: message 0: ")
    assert problems[1] == (f"{src}:4: line 1, column 1 (offset 0): unexpected text; "
                           "expected <|user_end|>; found 'BAD'; near 'BAD'")
    assert "checked 6, ok 2, failed 4" in captured.err and "skipped blank 1" in captured.err
    assert cli.main(["validate", str(src), "--lenient", "--max-errors", "0"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "checked 6, ok 3, failed 3, 1 warning, skipped blank 1 in " in captured.err


def test_a_null_messages_or_text_is_not_set(tmp_path, capsys):
    """null means "not set" (as a null column of a Parquet row): validate checks the
    "text" of a line whose "messages" is null, and a line with nothing set is reported
    as such (it used to say 'expected an object with a "messages" key', which it has)."""
    text = render([{"role": "user", "content": "hi"}], date=DATE)
    src = write_lines(tmp_path / "n.jsonl", [
        json.dumps({"messages": None, "text": text}),           # 1 ok: the text is checked
        json.dumps({"messages": None, "text": text + "x"}),     # 2 the text's parse error
        json.dumps({"messages": None}),                         # 3
        json.dumps({"messages": None, "text": None}),           # 4
        json.dumps({"text": None, "id": 4}),                    # 5
    ])
    assert cli.main(["validate", str(src)]) == 1
    problems = capsys.readouterr().out.splitlines()
    assert [p.split(": ", 1)[0] for p in problems] == [f"{src}:{n}" for n in (2, 3, 4, 5)]
    assert problems[0].startswith(f"{src}:2: line 4, column 73 (offset 269): unexpected")
    assert problems[1:] == [f'{src}:3: "messages" is null in this line',
                            f'{src}:4: "messages" and "text" are null in this line',
                            f'{src}:5: "text" is null in this line']
    for command, line, reason in [("render", {"messages": None, "id": 1}, '"messages" is null'),
                                  ("parse", {"text": None}, '"text" is null'),
                                  ("completions", {"completion": None}, '"completion" is null')]:
        one = write_lines(tmp_path / "one.jsonl", [json.dumps(line)])
        assert cli.main([command, str(one), "-o", str(tmp_path / "o.jsonl")]) == 1
        assert capsys.readouterr().err.startswith(f"{one}:1: {reason} in this line\n")


def test_validate_samples_every_dialect(capsys):
    for dialect in ALL_DIALECTS:
        assert cli.main(["validate", str(CONVERSATIONS), "--dialect", dialect]) == 0
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "checked 31, ok 31, failed 0" in captured.err
    assert cli.main(["validate", str(MULTIMODAL), "--dialect", "apertus-1"]) == 1
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 5  # line 1 has only an "image" part


def test_render_does_not_import_the_parser(tmp_path):
    code = ("import sys, apertus_fast.cli as c; c.main(['render', sys.argv[1], '-q']); "
            "print('apertus_fast._parse' in sys.modules)")
    env = dict(os.environ)
    env["PYTHONPATH"] = PKG_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code, str(CONVERSATIONS)], capture_output=True,
                          env=env, timeout=60)
    assert proc.stdout.decode().splitlines()[-1] == "False"


# --------------------------------------------------------------------------- parse / validate end to end (real parser)


def _real_parse():
    from apertus_fast._parse import parse

    return parse


def test_parse_raw_sample_end_to_end(capsys):
    parse = _real_parse()
    text = RENDERED_15.read_text(encoding="utf-8")
    assert cli.main(["parse", str(RENDERED_15), "--dialect", "apertus-1.5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    got = json.loads(out[0])
    assert got == json.loads(json.dumps(parse(text, dialect="apertus-1.5").to_dict()))
    assert isinstance(got["messages"], list) and got["enable_thinking"] is True


@pytest.mark.parametrize("dialect", ALL_DIALECTS)
def test_render_parse_render_round_trip(tmp_path, dialect, capsys):
    """render -> parse -> render through the CLI gives back the same texts: parse output
    carries the dialect, the date and the rendered tool section, so the second render
    needs no options at all."""
    src = CONVERSATIONS if dialect != "apertus-1.5" else tmp_path / "all.jsonl"
    if dialect == "apertus-1.5":
        src.write_bytes(CONVERSATIONS.read_bytes() + MULTIMODAL.read_bytes())
    rendered, parsed, again = (tmp_path / n for n in ("r.jsonl", "p.jsonl", "r2.jsonl"))
    assert cli.main(["render", str(src), "-o", str(rendered), "--date", "2027-03-04",
                     "--dialect", dialect]) == 0
    assert cli.main(["parse", str(rendered), "-o", str(parsed), "--dialect", dialect]) == 0
    assert cli.main(["render", str(parsed), "-o", str(again)]) == 0
    assert read_json_lines(again) == read_json_lines(rendered)
    assert len(read_json_lines(again)) >= 31
    assert cli.main(["validate", str(rendered), "--dialect", dialect]) == 0
    assert cli.main(["validate", str(parsed)]) == 0  # parse output validates by rendering
    capsys.readouterr()


def test_parse_errors_end_to_end(tmp_path, capsys):
    parse = _real_parse()
    good = render([{"role": "user", "content": "Hallo"}, {"role": "assistant", "content": "Grüessech"}],
                  dialect="apertus-1.5", date=DATE)
    bad = good.replace("<|user_end|>", "", 1)
    with pytest.raises(ParseError) as info:
        parse(bad, dialect="apertus-1.5")
    e = info.value
    src = write_lines(tmp_path / "r.jsonl", [json.dumps(good), json.dumps({"text": bad})])
    assert cli.main(["parse", str(src), "--dialect", "apertus-1.5"]) == 1
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 1
    assert f"{src}:2: line {e.line}, column {e.column} (offset {e.offset}): {e.reason}" in captured.err
    assert cli.main(["parse", str(src), "--dialect", "apertus-1.5", "--skip-errors"]) == 0
    capsys.readouterr()

    # raw input: the reported LINE is the ParseError's line in the file
    raw = tmp_path / "bad.txt"
    raw_text = RENDERED_15.read_text(encoding="utf-8").replace("<|user_end|>", "<|user_start|>", 1)
    raw.write_text(raw_text, encoding="utf-8", newline="")
    with pytest.raises(ParseError) as info:   # (a raw file is read as bytes: parse's offsets)
        parse(raw_text.encode(), dialect="apertus-1.5")
    e = info.value
    assert cli.main(["parse", str(raw), "--dialect", "apertus-1.5"]) == 1
    assert (f"{raw}:{e.line}: line {e.line}, column {e.column} (offset {e.offset}): {e.reason}"
            in capsys.readouterr().err)


def test_parse_lenient_end_to_end(tmp_path, capsys):
    parse = _real_parse()
    full = RENDERED_15.read_text(encoding="utf-8")
    truncated = full[: full.index("Lugano is the better bet") + 10]  # model output cut off
    malformed = full.replace("<|system_end|>", "", 1)
    src = write_lines(tmp_path / "out.jsonl", [json.dumps(full), json.dumps(truncated), json.dumps(malformed)])
    strict_failures = 0
    for t in (full, truncated, malformed):
        try:
            parse(t, dialect="apertus-1.5")
        except ParseError:
            strict_failures += 1
    assert strict_failures >= 1
    assert cli.main(["parse", str(src), "--dialect", "apertus-1.5"]) == 1
    assert f"failed {strict_failures}" in capsys.readouterr().err
    warnings = sum(len(parse(t, dialect="apertus-1.5", strict=False).warnings) for t in (full, truncated, malformed))
    assert cli.main(["parse", str(src), "--dialect", "apertus-1.5", "--lenient"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3
    assert captured.err.count(": warning: ") == warnings >= 1


@pytest.mark.parametrize("command", ["parse", "validate"])
def test_raw_lenient_warnings_name_their_line(tmp_path, capsys, command):
    """Raw input: a warning is reported at the line of the file it is about, as an
    error is (it was always reported at line 1)."""
    src = tmp_path / "conv.txt"
    src.write_text("<s><|system_start|>S<|system_end|><|developer_start|>Deliberation: disabled\n"
                   "Tool Capabilities: disabled<|developer_end|><|user_start|>hi\nthere<|user_end|>"
                   '<|assistant_start|><|tools_prefix|>[{"f": {}}]<|tool_output_start|>1'
                   "<|tool_output_end|>ok<|assistant_end|>", encoding="utf-8", newline="")
    args = [command, str(src), "--dialect", "apertus-1.5", "--lenient"]
    assert cli.main(args + (["-o", str(tmp_path / "out.jsonl")] if command == "parse" else [])) == 0
    captured = capsys.readouterr()
    warnings = [w for w in (captured.out + captured.err).splitlines() if ": warning: " in w]
    assert warnings and all(w.startswith(f"{src}:3: warning: line 3, column ") for w in warnings), warnings


@pytest.mark.parametrize("command", ["parse", "validate"])
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_text_of_another_dialect_is_reported_as_a_warning(tmp_path, command, jobs):
    """apertus-1.5 text read as apertus-1 parses (it is valid text of it) with a warning
    at its line, counted, as lenient recoveries are; the library's DialectWarning is not
    printed besides."""
    msgs = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": {"blocks": [
                {"type": "tool_calls", "calls": [{"name": "f", "arguments": "{}"}]},
                {"type": "tool_outputs", "outputs": [{"output": "42"}]},
                {"type": "response", "text": "ok"}]}}]
    text = render(msgs, dialect="apertus-1.5", date=DATE)
    plain = render(msgs[:1], dialect="apertus-1", date=DATE)
    src = write_lines(tmp_path / "texts.jsonl", [json.dumps({"text": plain}), json.dumps(text)])
    extra = ["-o", str(tmp_path / "out.jsonl")] if command == "parse" else []
    done = run_cli(command, src, "--dialect", "apertus-1", "-j", jobs, *extra)
    err = done.stderr.decode() + (done.stdout.decode() if command == "validate" else "")
    assert done.returncode == 0, err
    at = text.index("<|tool_output_start|>")
    line, column = text[:at].count("\n") + 1, at - text.rfind("\n", 0, at)
    assert (f"{src}:2: warning: line {line}, column {column}: <|tool_output_start|> is a token "
            "of apertus-1.5, not of apertus-1, and was read as text") in err
    assert err.count("warning:") == 1 and "1 warning" in err and "DialectWarning" not in err


def test_validate_end_to_end(tmp_path, capsys):
    parse = _real_parse()
    convs = sample_values()[:2]
    texts = [expected_render(v, "apertus-1") for v in convs]
    bad_text = texts[1].replace("<|assistant_start|>", "<|assistant_end|>", 1)
    with pytest.raises(ParseError) as info:
        parse(bad_text, dialect="apertus-1")
    src = write_lines(tmp_path / "mixed.jsonl", [
        json.dumps(convs[0], ensure_ascii=False),
        json.dumps(texts[0]),
        json.dumps({"text": bad_text}),
        '{"messages": [{"role": "assistant", "content": "x"}, {"role": "assistant", "content": {"blocks": []}}]}',
    ])
    assert cli.main(["validate", str(src), "--dialect", "apertus-1"]) == 1
    captured = capsys.readouterr()
    problems = captured.out.splitlines()
    assert len(problems) == 2
    e = info.value
    assert problems[0] == f"{src}:3: {cli._parse_error_reason(e)}"
    assert problems[1].startswith(f"{src}:4: message 1: ")
    assert "checked 4, ok 2, failed 2" in captured.err

    assert cli.main(["validate", str(RENDERED_15), "--dialect", "apertus-1.5"]) == 0
    assert "checked 1, ok 1, failed 0" in capsys.readouterr().err


@pytest.mark.parametrize("date", ["2026-13-01", "20260101", "tomorrow", ""])
def test_bad_date_is_a_usage_error(date, capsys):
    assert cli.main(["render", str(CONVERSATIONS), "--date", date]) == 2
    err = capsys.readouterr().err
    assert f"argument --date: expected a date as YYYY-MM-DD, got {date!r}" in err


# --------------------------------------------------------------------------- completions


def sample_completions(dialect="apertus-1.5"):
    """Model-like completions: the last assistant turn of each sample conversation,
    rendered with reasoning where the sample has it, cut where a model would stop."""
    from apertus_fast._parse import scan_str
    from apertus_fast._dialects import Kind, get_dialect

    out = []
    for value in sample_values():
        messages = value["messages"] if isinstance(value, dict) else value
        try:
            text = render(messages, dialect=dialect, tools=value.get("tools") if isinstance(value, dict) else None,
                          enable_thinking=True, date=DATE)
        except RenderError:
            continue
        ev = scan_str(text, get_dialect(dialect))
        starts = [ev[j + 2] for j in range(0, len(ev), 3) if ev[j] == Kind.ASSISTANT_START]
        if starts:
            out.append(text[starts[-1]:])
    return out


def expected_completion(text, dialect="apertus-1.5", prompt=None):
    from apertus_fast import parse_completion

    c = parse_completion(text, dialect=dialect, prompt=prompt)
    record = {"content": c.content, "reasoning": c.reasoning, "tool_calls": c.tool_calls,
              "tool_outputs": c.tool_outputs, "finish_reason": c.finish_reason,
              "closed": c.closed, "messages": c.messages}
    if c.warnings:
        record["warnings"] = c.warnings
    if c.rest:
        record["rest"] = c.rest
    return record


def test_completions_read_each_line_as_parse_completion_does(tmp_path, capsys):
    completions = sample_completions()
    assert len(completions) >= 20
    assert any("<|tools_prefix|>" in c for c in completions)
    assert any("<|inner_prefix|>" in c for c in completions)
    src = write_lines(tmp_path / "c.jsonl", [json.dumps(c, ensure_ascii=False) for c in completions])
    out = tmp_path / "out.jsonl"
    assert cli.main(["completions", str(src), "--dialect", "apertus-1.5", "-o", str(out)]) == 0
    expected = [expected_completion(c) for c in completions]
    assert read_json_lines(out) == expected
    warned = sum(len(r.get("warnings", ())) for r in expected)
    assert any(r.get("rest") for r in expected)   # one model ran past the end of its turn
    assert f"read {len(completions):,} completions ({cli._plural(warned, 'warning')}), failed 0" in \
        capsys.readouterr().err


def test_completions_objects_prompts_keep_and_openai(tmp_path, capsys):
    prompt = render([{"role": "user", "content": "Weather?"},
                     {"role": "assistant", "content": {"blocks": [
                         {"type": "thoughts", "text": "Look."},
                         {"type": "tool_calls", "calls": [{"name": "w", "arguments": "{}"}]},
                         {"type": "tool_outputs", "outputs": [{"output": "21"}]}]}}],
                    dialect="apertus-1", continue_assistant_message=True, date=DATE)
    lines = [{"id": "a", "completion": "<|tools_prefix|>[{\"f\": {\"x\": 1}}]<|tools_suffix|>"},
             {"id": "b", "completion": " Warm.<|inner_suffix|>21 °C.<|assistant_end|>", "prompt": prompt},
             {"id": "c", "completion": "Cut <|tools_prefix|>[{\"g\": {\"y\""}]
    src = write_lines(tmp_path / "c.jsonl", [json.dumps(v, ensure_ascii=False) for v in lines])
    out = tmp_path / "out.jsonl"
    assert cli.main(["completions", str(src), "--dialect", "apertus-1", "--keep", "id",
                     "-o", str(out)]) == 0
    records = read_json_lines(out)
    assert [list(r)[:2] for r in records] == [["id", "content"]] * 3
    assert [r["id"] for r in records] == ["a", "b", "c"]
    assert records[1] == {"id": "b", **expected_completion(lines[1]["completion"], "apertus-1", prompt)}
    assert (records[1]["reasoning"], records[1]["content"]) == (" Warm.", "21 °C.")
    assert [r["finish_reason"] for r in records] == ["tool_calls", "stop", None]
    err = capsys.readouterr().err
    assert f"{src}:3: warning: line 1, column" in err and "(2 warnings)" in err
    # OpenAI messages, with ids made of the line and the call's number
    assert cli.main(["completions", str(src), "--dialect", "apertus-1", "--openai",
                     "-o", str(out)]) == 0
    records = read_json_lines(out)
    assert records[0] == {"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1_0", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
        "finish_reason": "tool_calls"}
    assert records[1] == {"message": {"role": "assistant", "content": "21 °C.",
                                      "reasoning_content": " Warm."}, "finish_reason": "stop"}
    assert records[2]["message"]["tool_calls"][0]["id"] == "call_3_0"


def test_completions_bad_lines_are_reported(tmp_path, capsys):
    lines = ['"ok"', "{}", '{"completion": 3}', '{"completion": "x", "prompt": 4}',
             '{"completion": "x", "prompt": "<|user_start|>hi<|user_end|>"}', "[1]", "not json"]
    src = write_lines(tmp_path / "bad.jsonl", lines)
    out = tmp_path / "out.jsonl"
    assert cli.main(["completions", str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f'{src}:2: expected a JSON string or an object with a "completion" key' in err
    assert f'{src}:3: "completion" must be a string, got a number' in err
    assert f'{src}:4: "prompt" must be a string, got a number' in err
    assert f"{src}:5: the prompt does not end inside an assistant turn" in err
    assert f'{src}:6: expected a JSON string or an object with a "completion" key, got a list' in err
    assert f"{src}:7: " in err and "failed 6" in err
    assert read_json_lines(out) == [expected_completion("ok", DEFAULT_DIALECT)]
    assert cli.main(["completions", str(src), "-o", str(out), "--skip-errors", "-q"]) == 0
    assert cli.main(["completions", str(src), "--keep", "content"]) == 2
    assert '--keep content: the output has its own "content"' in capsys.readouterr().err


def test_completions_sample_shows_each_case(tmp_path, capsys):
    """samples/completions-1.5.jsonl, read by `make demo`: each line is the case the
    samples README says it is."""
    out = tmp_path / "out.jsonl"
    sample = SAMPLES / "completions-1.5.jsonl"
    assert cli.main(["completions", str(sample), "--dialect", "apertus-1.5", "--keep", "id",
                     "-o", str(out)]) == 0
    records = {r["id"]: r for r in read_json_lines(out)}
    assert [r["finish_reason"] for r in records.values()] == [
        "stop", "tool_calls", "stop", "stop", None, "stop", "tool_calls", "stop", "tool_calls"]
    assert records["c-001"]["reasoning"].startswith("The user asks") and records["c-001"]["closed"]
    assert [c["name"] for c in records["c-002"]["tool_calls"]] == ["get_weather", "get_weather"]
    # continued after the tool output, inside the reasoning the prompt left open
    assert records["c-003"]["reasoning"].startswith(" Sonnig") and "Uetliberg" in records["c-003"]["content"]
    assert [b["type"] for b in records["c-003"]["messages"][0]["content"]["blocks"]] == [
        "thoughts", "tool_calls", "tool_outputs", "thoughts", "response"]
    assert (records["c-004"]["reasoning"], records["c-004"]["content"]) == (
        "Simple greeting; answer in Romansh as asked.", "Allegra! Co vai?")
    assert records["c-005"]["tool_calls"][0]["arguments"].endswith("| Süd")
    assert json.loads(records["c-007"]["tool_calls"][0]["arguments"])["params"][1] == {
        "name": "offset", "value": 0}
    assert records["c-008"]["rest"] == "<|user_start|>Und warum?"
    # an OpenAI-style call object: the call it names, with a warning
    assert [(c["name"], c["arguments"]) for c in records["c-009"]["tool_calls"]] == [
        ("get_train_connections", '{"from": "Bern", "to": "Lugano"}')]
    assert "from OpenAI-style objects" in records["c-009"]["warnings"][0]
    # <think> tags are read as the reasoning delimiters, and each reading is a warning
    assert records["c-004"]["warnings"] == ["line 1, column 1: <think> read as <|inner_prefix|>",
                                            "line 1, column 52: </think> read as <|inner_suffix|>"]
    assert "read 9 completions (6 warnings), failed 0" in capsys.readouterr().err


@pytest.mark.parametrize("code, said", [
    (errno.EMFILE, "apertus-fast: error: Too many open files\n"),
    # (a full non-blocking stdout says EAGAIN: the output's; a fork that fails is named
    # where the workers start, test_cli_jobs.py)
    (errno.EAGAIN, "apertus-fast: error: cannot write <stdout>: Resource temporarily unavailable\n"),
    (errno.ENOSPC, "apertus-fast: error: cannot write <stdout>: No space left on device\n"),
])
def test_an_error_of_the_systems_resources_is_not_blamed_on_the_output(tmp_path, monkeypatch, capsys, code, said):
    """Every OSError that ended a command was reported as the output's: with -o - a
    worker's pipe that could not be made (too many open files, under -j) said
    "cannot write <stdout>" (review). Errors of the system's resources say what they
    are; errors of writing still name the output."""
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")

    def fail(args):
        raise OSError(code, os.strerror(code))

    parser = cli.build_parser()     # (its render command runs `fail`)
    parser._subparsers._group_actions[0].choices["render"].set_defaults(func=fail)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main(["render", str(src), "-q"]) == 2
    assert capsys.readouterr().err == said
