from tcompile.compiler.signature import (
    FailureSignature,
    guard_failures,
    innermost_frame,
    normalize_message,
    root_cause,
    scrub_guards,
)


def test_normalize_scrubs_numbers_paths_addresses():
    a = normalize_message("shape (2x5) at 0x7f00deadbeef in /tmp/torchinductor_root/ab/cabc.py")
    b = normalize_message("shape (4x7) at 0x7f11aaaa0000 in /tmp/other/cd/cabc.py")
    assert a == b
    assert "<addr>" in a and "<path>/" in a


def test_a_source_place_is_the_same_in_a_minified_copy():
    a = normalize_message("Recompiling function forward in /home/u/model.py:17")
    assert a == normalize_message("Recompiling function forward in <candidate>:3")
    assert a == normalize_message("Recompiling function forward in repro.py:2")
    assert a != normalize_message("Recompiling function backward in repro.py:2")


def test_guard_failures_name_the_guard_not_the_sizes():
    msg = (
        "Recompiling function forward in /a/m.py:17\n"
        "    triggered by the following guard failure(s):\n"
        "    - 0/0: tensor 'x' size mismatch at index 0. expected 8, actual 12\n"
        "\nSet TORCH_LOGS=recompiles for more"
    )
    same = msg.replace("expected 8, actual 12", "expected 2, actual 3")
    other = msg.replace("'x'", "'y'")
    assert (
        guard_failures(msg)
        == guard_failures(same)
        == ["N/N: tensor 'x' size mismatch at index N. expected N, actual N"]
    )
    assert guard_failures(msg) != guard_failures(other)
    assert guard_failures("Unsupported: a graph break") == []
    # as torch._dynamo records them: the source comment is not part of the guard
    a = scrub_guards(["0/1: act == 'tanh'  # h = getattr(torch, act)(h)  # /a/m.py:19 in f"])
    assert a == scrub_guards(["0/1: act == 'tanh'  # h = getattr(torch, act)(h)  # <candidate>:3"])
    assert a == ["N/N: act == 'tanh'"]


def test_normalize_keeps_first_line_only():
    assert normalize_message("Boom: bad\n  generated code dump\n  more") == "Boom: bad"


def test_signature_matching_ignores_frame():
    s1 = FailureSignature(
        "inductor", "compile", "exc.CppCompileError", "C++ compile error", "a.py:1"
    )
    s2 = FailureSignature(
        "inductor", "compile", "exc.CppCompileError", "C++ compile error", "b.py:9"
    )
    s3 = FailureSignature("inductor", "runtime", "exc.CppCompileError", "C++ compile error")
    assert s1.matches(s2)
    assert not s1.matches(s3)
    assert not s1.matches(None)
    assert FailureSignature.from_json(s1.to_json()) == s1


def test_from_exception_follows_wrappers():
    class BackendCompilerFailed(Exception):
        pass

    inner = ValueError("bad value 12")
    try:
        try:
            raise inner
        except ValueError as e:
            raise BackendCompilerFailed("wrapped") from e
    except BackendCompilerFailed as outer:
        assert root_cause(outer) is inner
        sig = FailureSignature.from_exception("inductor", "compile", outer)
    assert sig.exc_type == "ValueError"
    assert sig.message == "bad value N"
    assert str(sig) == "inductor/compile: ValueError: bad value N"


def test_innermost_frame_names_this_file():
    try:
        raise RuntimeError("x")
    except RuntimeError as e:
        frame = innermost_frame(e)
    assert frame.startswith("test_signature.py:") and frame.endswith(
        "test_innermost_frame_names_this_file"
    )


def test_one_rule_for_every_level():
    """Graph workers, bisect probes, the run's plain re-run, program-level candidates
    and the capture worker all ask FailureSignature.matches."""
    g = FailureSignature("inductor", "compile", "CppCompileError", "x")
    assert g.matches(FailureSignature("inductor", "compile", "CppCompileError", "x", "f.py:1"))
    assert not g.matches(FailureSignature("aot_eager", "compile", "CppCompileError", "x"))
    assert g.matches(
        FailureSignature("aot_eager", "compile", "CppCompileError", "x"), any_stage=True
    )
    # as the program dies of it: stage and kind aside; the raising line, else the message
    p = FailureSignature("program", "runtime", "AssertionError", "stale 3", line="assert x == 2")
    assert p.matches(
        FailureSignature("script", "exception", "AssertionError", "stale 4", line="assert x == 2"),
        as_exception=True,
    )
    assert not p.matches(
        FailureSignature("script", "exception", "AssertionError", "other", line="assert y"),
        as_exception=True,
    )
    bare = FailureSignature("program", "exception", "AssertionError", "", line="assert ok")
    assert not bare.matches(
        FailureSignature("program", "exception", "AssertionError", "", line="assert other"),
        as_exception=True,
    )
    # a crash is its signal, whatever the process printed
    crash = FailureSignature("program", "crash", "signal 6", "terminate called")
    assert crash.matches(FailureSignature("x", "crash", "signal 6", "other"), as_exception=True)
    assert not crash.matches(FailureSignature("x", "exception", "signal 6", ""), as_exception=True)


def test_a_recompilation_keeps_its_guards():
    target = FailureSignature("eager", "capture", "RecompileLimitExceeded", "m", guards=("a",))
    same = FailureSignature("eager", "capture", "RecompileLimitExceeded", "m", guards=("a",))
    other = FailureSignature("eager", "capture", "RecompileLimitExceeded", "m", guards=("b",))
    assert target.matches(same) and not target.matches(other)
    assert FailureSignature.from_json(target.to_json()) == target
    assert FailureSignature.from_json({"stage": "s", "kind": "k"}).guards == ()
