"""The autotune choice a verification failure names, pinned for the repro (pure text)."""

import re

from tcompile.compiler.autotune import PIN_KEY, pinned_choice

DESC = "ALLOW_TF32=False, BLOCK_K=16, BLOCK_M=64, BLOCK_N=256, GROUP_M=8, num_stages=2, num_warps=8"
MESSAGE = (
    "AssertionError: Incorrect result from choice TritonTemplateCaller("
    f"/tmp/torchinductor_root/ab/cabcdef.py, {DESC})\n\nTensor-likes are not close!\n"
    "Mismatched elements: 57460 / 67830 (84.7%)"
)


def test_the_failing_choice_alone_matches_its_regex():
    pin = pinned_choice(MESSAGE)
    assert pin is not None
    regex = pin["config"][PIN_KEY]
    assert re.search(regex, DESC)
    # its siblings differ in one number: none of them is kept
    assert not re.search(regex, DESC.replace("num_warps=8", "num_warps=4"))
    assert not re.search(regex, DESC.replace("BLOCK_K=16", "BLOCK_K=164"))
    assert not re.search(regex, "")  # the ATen choice
    assert pin["choice"] == f"TritonTemplateCaller({DESC})"
    assert str(pin["signature"]).startswith("inductor/accuracy: AccuracyError: ")


def test_other_failures_pin_nothing():
    assert pinned_choice("RuntimeError: CUDA error: an illegal memory access") is None
    assert pinned_choice("") is None
    # a caller whose str is its description alone
    pin = pinned_choice("AssertionError: Incorrect result from choice CppTemplateCaller(x=1)")
    assert pin is not None and re.search(pin["config"][PIN_KEY], "x=1")
