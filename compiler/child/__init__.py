"""tcompile.compiler.child: code that runs inside the user's interpreter.

Nothing in this package runs in tcompile's own process.  It is imported by the start-up
hook (``compiler/bootstrap/sitecustomize.py``) of a process tcompile runs, and by the
entry points whose names the parent passes as strings (protocol.REPLAY_DRIVER,
protocol.LAUNCHER_WORKER).  It talks back only through the protocol: events, markers,
capture files and the worker's pipes.

  hooks.py            start-up: patch torch.compile, chain sys.excepthook
  exits.py            how a rank's own code ended, said at the start of its exit
  opened.py           the files the program opens to read (the program level's baseline)
  session.py          one per process: config, recorder, failures said once
  recorder.py         events out, the live marker
  backend.py          TcompileBackend: number, copy, compile each Dynamo graph
  runners.py          what runs in place of compiled graphs; the AOT-level hooks
  build.py            the stages built as backends
  subsystems.py       inductor's bisection hook points, counted and limited
  patterns.py         which pattern of a pattern-matcher pass fired or raised; one turned off
  observe.py          checking a graph by watching the program's own call
  postmortem.py       each graph's last call, judged if the program dies of its own check
  tensor_hooks.py     the program's gradient hooks a compiled backward bypasses (issue 63)
  localize.py         where a run's accuracy failure first goes wrong
  numerics.py         the first wrong node, its kernel, the numerics switch that fixes it
  global_state.py     the process-wide autograd state a candidate may leave behind
  judge.py            a minifier worker's verdict on one candidate
  serve.py            a minifier worker's serve loop (and a launcher's worker)
  forkserve.py        the fork server's own side: import torch, fork candidates
  standby.py          a worker started ahead: imports torch, waits to become one
  capture_worker.py   a worker that judges candidate source for a capture failure
  capture_entries.py  the capture worker's entries, called by the source minifier
  capture_info.py     what the capture worker tells the source minifier and writer
  frames.py           recording frames that fail in Dynamo
  replay_driver.py    the program `tcompile replay` runs
  diagnostics.py      recompilations and compile metrics for `tcompile explain`
  torch_config.py     the compiler config in force, read and applied
  graphs.py           small facts about FX graphs; the one graph-copy helper
"""
