"""Autotuning's checks the program set itself (select_algorithm.VERIFY and its own
AlgorithmSelectorCache.lookup, as torch's tests and #173068 set them) travel with a
captured graph: a worker judging it alone verifies each choice as the program did
(compiler/child/torch_config.select_algorithm_diffs; issue 61).  No compile: two
processes, one setting them, one restoring them."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SETS = textwrap.dedent(
    """
    import json
    import torch._inductor.select_algorithm as select_algorithm
    from tcompile.compiler.child.torch_config import config_diffs


    def skip_cache(self, choices, name, key, benchmark, *args, **kwargs):
        if benchmark is None:
            return {}
        return benchmark(choices)


    before = config_diffs().get("select_algorithm")
    select_algorithm.VERIFY = dict(atol=1e-4, rtol=1e-4)
    select_algorithm.AlgorithmSelectorCache.lookup = skip_cache
    print(json.dumps({"before": before, "after": config_diffs()["select_algorithm"]}))
    """
)

RESTORES = textwrap.dedent(
    """
    import json, sys
    import torch
    import torch._inductor.select_algorithm as sa
    from tcompile.compiler.child.torch_config import apply_config

    apply_config({"select_algorithm": json.loads(sys.argv[1])}, {"torch": torch})
    lookup = sa.AlgorithmSelectorCache.lookup
    print(json.dumps([sa.VERIFY, lookup.__name__, lookup(None, [1], "n", "k", len)]))
    """
)


def test_autotunings_checks_set_by_the_program_are_captured_and_restored(tmp_path):
    (tmp_path / "prog.py").write_text(SETS)
    ran = subprocess.run(
        [sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    got = json.loads(ran.stdout.splitlines()[-1])
    assert got["before"] is None  # torch's own state: nothing to restate
    state = got["after"]
    assert state["VERIFY"] == {"atol": 1e-4, "rtol": 1e-4}
    assert state["lookup"]["function"] == "skip_cache"
    assert "return benchmark(choices)" in state["lookup"]["source"]
    again = subprocess.run(
        [sys.executable, "-c", RESTORES, json.dumps(state)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    verify, name, answer = json.loads(again.stdout.splitlines()[-1])
    assert verify == {"atol": 1e-4, "rtol": 1e-4} and name == "skip_cache" and answer == 1


def test_a_repro_says_them_but_pins_the_choice_instead():
    from tcompile.compiler.configs import config_source

    state = {"VERIFY": {"atol": 1e-4}, "lookup": {"function": "skip_cache", "source": "x"}}
    lines, _ = config_source({"select_algorithm": state})
    assert "select_algorithm's VERIFY={'atol': 0.0001}, lookup=skip_cache" in lines
    assert "inductor_config.select_algorithm" not in lines
