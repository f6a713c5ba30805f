"""Hostile and malformed input, fuzzed (hypothesis): the record reader, the launcher
reader and the CLI's argument handling.  Every malformed input is a one-line
``tcompile: error:`` and exit 2; nothing is ever unpickled or executed.  No compiles,
no torch import: the CLI runs in-process (click's runner), so hundreds of inputs
take seconds.

The tally of inputs tried (and of those that gave anything but a one-line exit 2) is
written to ``$TCOMPILE_FUZZ_TALLY`` when set (the closing note's figure).
"""

from __future__ import annotations

import json
import os
import pickle
import string
from pathlib import Path

import pytest
from click.testing import CliRunner

from tcompile.compiler import record_format as rec

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SETTINGS = settings(
    max_examples=int(os.environ.get("TCOMPILE_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
TALLY: dict[str, list[int]] = {}


def _count(name: str, bad: bool) -> None:
    tried, failed = TALLY.setdefault(name, [0, 0])
    TALLY[name] = [tried + 1, failed + int(bad)]


@pytest.fixture(scope="module", autouse=True)
def _tally():
    yield
    path = os.environ.get("TCOMPILE_FUZZ_TALLY")
    if path:
        old = json.loads(Path(path).read_text()) if Path(path).exists() else {}
        old.update(TALLY)
        Path(path).write_text(json.dumps(old, indent=1))


@pytest.fixture(autouse=True)
def _own_key(tmp_path, monkeypatch):
    """A key of this test's own: records signed here are 'this user's'."""
    monkeypatch.setenv("TCOMPILE_CACHE_DIR", str(tmp_path / "cache"))


class _Tripwire:
    """Unpickling this creates the file at ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _cli(*args: str):
    from tcompile.cli.main import main

    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def _one_line_exit_2(result) -> bool:
    if result.exit_code != 2 or result.exception and not isinstance(result.exception, SystemExit):
        return False
    lines = [ln for ln in (result.stderr or result.output).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("tcompile: warning:")]
    return len(lines) == 1 and lines[0].startswith("tcompile: error: ")


# ---- records --------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELDS = sorted(rec._TYPES) + ["written", "tcompile", "cwd"]


@st.composite
def malformed_records(draw, tmp: Path):
    """A record file: a good shape with one or more things wrong (types, sizes, the
    checksum, the header), or plain garbage."""
    marker = tmp / "UNPICKLED"
    payload = pickle.dumps({"code": pickle.dumps(_Tripwire(str(marker)))})
    if draw(st.booleans()):
        payload = pickle.dumps(_Tripwire(str(marker)))  # even the outer layer
    meta = {
        "payload_bytes": len(payload),
        "payload_sha256": __import__("hashlib").sha256(payload).hexdigest(),
        "format": rec.FORMAT,
        "function": "f",
        "signature_text": "eager/capture: X",
    }
    kind = draw(st.sampled_from(["types", "sizes", "header", "garbage", "unsigned", "torch"]))
    if kind == "types":
        for key in draw(st.lists(st.sampled_from(_FIELDS), min_size=1, max_size=4)):
            meta[key] = draw(_JSON)
        if not isinstance(meta.get("payload_bytes"), int) or isinstance(
            meta["payload_bytes"], bool
        ):
            pass  # wrong on purpose
        elif (
            meta["payload_bytes"] == len(payload)
            and meta.get("payload_sha256") == rec.hashlib.sha256(payload).hexdigest()
        ):
            meta["hmac"] = draw(st.text(max_size=70))  # a forged signature at least
        data = _record_bytes(meta, payload)
    elif kind == "sizes":
        meta["payload_bytes"] = draw(st.integers(min_value=-(2**40), max_value=2**40))
        data = _record_bytes(meta, payload)
    elif kind == "header":
        first = (
            draw(st.binary(max_size=40))
            if draw(st.booleans())
            else rec.MAGIC + b" " + draw(st.text(string.printable, max_size=6)).encode()
        )
        data = first + b"\n" + draw(st.binary(max_size=200)) + b"\n" + payload
    elif kind == "unsigned":
        data = _record_bytes(meta, payload)  # valid but for the signature
    elif kind == "torch":
        data = pickle.dumps(_Tripwire(str(marker))) + draw(st.binary(max_size=20))
    else:
        data = draw(st.binary(max_size=400))
    return data, kind, marker


def _record_bytes(meta, payload) -> bytes:
    return (
        rec.MAGIC + b" %d\n" % rec.FORMAT + json.dumps(meta, default=str).encode() + b"\n" + payload
    )


@SETTINGS
@given(data=st.data())
def test_fuzzed_records_are_one_line_exit_2(tmp_path, data):
    body, kind, marker = data.draw(malformed_records(tmp_path))
    path = tmp_path / "fuzzed.pkl"
    path.write_bytes(body)
    # the reader: a record or a RecordError, nothing else
    try:
        info = rec.read_info(path)
        rec.check_payload(info)
        trusted = rec.is_trusted(info)
    except rec.RecordError:
        trusted = False
    assert not trusted  # nothing here was signed with this user's key
    for extra in (["--info"], [], ["--json"]):
        result = _cli("replay", *extra, str(path))
        ok = _one_line_exit_2(result) or (extra == ["--info"] and result.exit_code == 0)
        _count("record", not ok or marker.exists())
        assert ok, (kind, extra, result.exit_code, result.output)
        assert not marker.exists(), (kind, extra)


def test_signed_record_is_trusted_and_an_altered_one_is_not(tmp_path):
    path = tmp_path / "r.pkl"
    rec.write_record(path, {"function": "f"}, pickle.dumps({"code": b"x"}))
    assert rec.read_info(path).trusted
    text = path.read_bytes().replace(b'"function": "f"', b'"function": "g"')
    path.write_bytes(text)
    assert not rec.read_info(path).trusted  # the metadata changed: the HMAC says so


def test_untrusted_record_is_refused_before_unpickling(tmp_path):
    marker = tmp_path / "UNPICKLED"
    path = tmp_path / "theirs.pkl"
    payload = pickle.dumps({"code": pickle.dumps(_Tripwire(str(marker)))})
    rec.write_record(path, {"function": "f", "python": "3.11.7"}, payload, sign=False)
    result = _cli("replay", str(path))
    assert _one_line_exit_2(result) and "--trust" in result.output
    assert not marker.exists()
    # --info shows it, says it is not signed, and executes nothing
    result = _cli("replay", "--info", str(path))
    assert result.exit_code == 0 and "NO: not by this user's tcompile" in result.output
    assert not marker.exists()


def test_outer_container_is_never_unpickled_with_plain_pickle(tmp_path):
    """Even with --trust, a payload whose outer layer is not a plain dict of bytes is
    refused by the restricted unpickler: the tripwire never fires."""
    marker = tmp_path / "UNPICKLED"
    path = tmp_path / "outer.pkl"
    rec.write_record(path, {"function": "f"}, pickle.dumps(_Tripwire(str(marker))))
    with pytest.raises(rec.RecordError, match="not a plain dict"):
        rec.read_payload(rec.read_info(path))
    result = _cli("replay", "--trust", str(path))
    assert _one_line_exit_2(result), result.output
    assert not marker.exists()


def test_torch_records_always_need_trust(tmp_path):
    marker = tmp_path / "UNPICKLED"
    path = tmp_path / "forward_IndexError_31.rec"
    path.write_bytes(pickle.dumps({"cls": "ExecutionRecord", "x": _Tripwire(str(marker))}))
    result = _cli("replay", str(path))
    assert _one_line_exit_2(result) and "--trust" in result.output
    assert not marker.exists()


def test_info_escapes_markup_and_control_characters(tmp_path):
    path = tmp_path / "r.pkl"
    nasty = "[bold red]boom[/bold red] \x1b[2J\x07 [link=file:///etc/passwd]x[/link]"
    rec.write_record(path, {"function": nasty, "arguments": {"x": nasty}}, pickle.dumps({}))
    result = _cli("replay", "--info", str(path))
    assert result.exit_code == 0, result.output
    assert "[bold red]boom[/bold red]" in result.output  # shown as text, not markup
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "\\x1b" in result.output


@pytest.mark.parametrize(
    "key, value",
    [
        ("payload_bytes", "12"),
        ("payload_bytes", None),
        ("payload_bytes", [1]),
        ("payload_bytes", True),
        ("sizes", "big"),
        ("sizes", {"tensors": "3"}),
        ("arguments", ["x"]),
        ("user_stack", "a"),
        ("line", "12"),
    ],
)
def test_metadata_of_the_wrong_type_is_exit_2(tmp_path, key, value):
    payload = pickle.dumps({})
    meta = {"payload_bytes": len(payload), "function": "f", key: value}
    import hashlib

    meta["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    path = tmp_path / "r.pkl"
    path.write_bytes(_record_bytes(meta, payload))
    for extra in (["--info"], []):
        result = _cli("replay", *extra, str(path))
        assert _one_line_exit_2(result), (key, value, result.output)
        assert "corrupt record" in result.output


# ---- launchers ------------------------------------------------------------------


def _launcher_text(data_literal: str) -> str:
    from tcompile.repro.launcher import MARKER

    return f'"""a launcher"""\nimport sys\n\n{MARKER}{data_literal}\n\nif __name__ == "__main__":\n    pass\n'


def _good_data() -> dict:
    from tcompile.repro.launcher import FORMAT

    return {
        "format": FORMAT,
        "signature": {"stage": "inductor", "kind": "compile", "exc_type": "E", "message": "m"},
        "accuracy": "off",
        "graph_file": "minifier_launcher_graph.pt",
        "inputs_file": "minifier_launcher_inputs.pt",
        "command": ["python", "x.py"],
        "meta": {"stage": "inductor"},
    }


@st.composite
def malformed_launchers(draw):
    data = _good_data()
    kind = draw(st.sampled_from(["types", "missing", "paths", "literal", "garbage"]))
    if kind == "types":
        for key in draw(st.lists(st.sampled_from(sorted(data)), min_size=1, max_size=3)):
            data[key] = draw(_JSON)
        if data == _good_data():
            data["accuracy"] = 3
        return repr(data), kind
    if kind == "missing":
        del data[draw(st.sampled_from(sorted(data)))]
        return repr(data), kind
    if kind == "paths":
        key = draw(st.sampled_from(["graph_file", "inputs_file"]))
        data[key] = draw(
            st.sampled_from(["/etc/passwd", "../secret.pt", "..", ".", "a/b.pt", "", "..\\x.pt"])
        )
        return repr(data), kind
    if kind == "literal":
        return draw(
            st.sampled_from(["[" * 2000, "__import__('os').system('touch X')", "{1: }", "f(x)"])
        ), kind
    return draw(st.text(max_size=200)), kind


@SETTINGS
@given(data=st.data())
def test_fuzzed_launchers_are_one_line_exit_2(tmp_path, data):
    literal, kind = data.draw(malformed_launchers())
    d = tmp_path / f"l{abs(hash(literal)) % 10**8}"
    d.mkdir(exist_ok=True)
    path = d / "minifier_launcher.py"
    path.write_text(_launcher_text(literal))
    result = _cli("minify", str(path))
    ok = _one_line_exit_2(result)
    _count("launcher", not ok)
    assert ok, (kind, literal[:200], result.exit_code, result.output)
    assert not (Path.cwd() / "X").exists()


@pytest.mark.parametrize("name", ["\x85", "a\u2028b.pt", "x\ny.pt", "\r"])
def test_a_file_name_with_a_line_break_still_gives_one_line(tmp_path, name):
    # found by the fuzzer: a data file named "\x85" (a line break to str.splitlines)
    data = _good_data()
    data["graph_file"] = name
    path = tmp_path / "minifier_launcher.py"
    path.write_text(_launcher_text(repr(data)))
    assert _one_line_exit_2(_cli("minify", str(path)))


def test_launcher_data_files_outside_its_folder_are_refused(tmp_path):
    from tcompile.repro.launcher import read_launcher

    outside = tmp_path / "elsewhere.pt"
    outside.write_bytes(b"x")
    d = tmp_path / "l"
    d.mkdir()
    for name in (str(outside), "../elsewhere.pt"):
        data = dict(_good_data(), graph_file=name)
        (d / "minifier_launcher.py").write_text(_launcher_text(repr(data)))
        with pytest.raises(ValueError, match="not a file name beside it"):
            read_launcher(d / "minifier_launcher.py")


def test_unsigned_launcher_needs_trust_before_its_pickles_load(tmp_path):
    from tcompile.repro.launcher import check_files

    marker = tmp_path / "UNPICKLED"
    d = tmp_path / "l"
    d.mkdir()
    data = _good_data()
    for key in ("graph_file", "inputs_file"):
        (d / data[key]).write_bytes(pickle.dumps(_Tripwire(str(marker))))
    (d / "minifier_launcher.py").write_text(_launcher_text(repr(data)))
    with pytest.raises(ValueError, match="--trust"):
        check_files(d / "minifier_launcher.py", data, trusted=False)
    result = _cli("minify", str(d / "minifier_launcher.py"))
    assert _one_line_exit_2(result) and "--trust" in result.output
    assert not marker.exists()


# ---- the command line -------------------------------------------------------------

_COMMANDS = ["run", "minify", "bisect", "explain", "replay"]
_BAD_VALUES = {
    "--timeout": st.sampled_from(["nan", "inf", "-1", "0", "1e309", "abc", "", "1e12"]),
    "--jobs": st.sampled_from(["0", "-3", "1000000", "x", "1.5", "999999999999"]),
    "--graph": st.sampled_from(["-1", "x", "1.5"]),
    "--after": st.sampled_from(["never", "AOT", ""]),
}


@st.composite
def bad_command_lines(draw):
    command = draw(st.sampled_from(_COMMANDS))
    kind = draw(st.sampled_from(["value", "unknown", "script", "missing"]))
    if kind == "value":
        option = draw(
            st.sampled_from(
                [o for o in _BAD_VALUES if command in ("minify",) or o in ("--timeout", "--jobs")]
            )
        )
        if option == "--jobs" and command not in ("minify", "bisect"):
            option = "--timeout"
        return [command, option, draw(_BAD_VALUES[option]), "fixtures/clean.py"], kind
    if kind == "unknown":
        opt = "--" + draw(st.text(string.ascii_lowercase + "-", min_size=2, max_size=12))
        return [command, opt, "fixtures/clean.py"], kind
    if kind == "script":
        name = draw(st.text(string.ascii_letters + string.digits + "_./-", min_size=1, max_size=30))
        name = "definitely-missing/" + name.lstrip("-") + ".py"
        return [command, name], kind
    return [command], kind


@SETTINGS
@given(data=st.data())
def test_fuzzed_command_lines_are_one_line_exit_2(data):
    argv, kind = data.draw(bad_command_lines())
    known = {p for c in _COMMANDS for p in _options_of(c)}
    if kind == "unknown" and argv[1] in known:
        return
    result = _cli(*argv)
    ok = _one_line_exit_2(result)
    _count("cli", not ok)
    assert ok, (argv, result.exit_code, result.output)


def _options_of(command: str) -> set[str]:
    from tcompile.cli.main import main

    return {o for p in main.commands[command].params for o in getattr(p, "opts", [])}
