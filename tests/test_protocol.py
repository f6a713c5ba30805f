import pytest

from tcompile.compiler.protocol import HookConfig, read_events, read_markers
from tcompile.compiler.recorder import Recorder


def test_config_roundtrip_and_schema():
    cfg = HookConfig(dir="/tmp/x", stage="aot_eager", accuracy="strict", gate=[1, 3])
    assert HookConfig.from_env(cfg.to_env()) == cfg
    with pytest.raises(ValueError):
        HookConfig.from_env('{"dir": "/x", "schema": 99}')


def test_recorder_events_and_marker(tmp_path):
    rec = Recorder(str(tmp_path))
    rec.emit("graph", index=0, nodes=3)
    rec.mark(0, 2, "backward")
    events = read_events(tmp_path)
    assert [e["event"] for e in events] == ["graph"]
    (marker,) = read_markers(tmp_path).values()
    assert marker == {"graph": 0, "phase": "run", "graph_kind": "backward"}
    # a line cut short by a crash is skipped, not fatal
    with open(next(tmp_path.glob("events-*.jsonl")), "a") as f:
        f.write('{"event": "fail')
    assert len(read_events(tmp_path)) == 1
