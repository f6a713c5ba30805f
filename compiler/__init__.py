"""tcompile.compiler: the only code that touches torch's private APIs.

Three layers, by the process a line runs in.

The contract, shared by tcompile's process and the user's (no torch import at import
time):

  protocol.py        what passes between the parent and the processes it runs
  signature.py       failure identity: FailureSignature and the one same-failure rule
  cause.py           a failure's cause: the raised type and the program's raising line
  owners.py          whose code a file is (tcompile's, torch's, installed, the user's)
  invariant.py       a clean verdict never contradicts how the program's processes ended
  failure.py         a row of ``failures[]``: one compiler failure, classified
  accuracy.py        the accuracy check (DESIGN.md mechanism 8): outcomes, judged
  accuracy_rule.py   the accuracy rule, once; repro.py files carry its text, generated
  stack.py           the torch.compile stack as data: stages, subsystems, toggles
  opname.py          an op's base name, however it was written: the one function
  culprit.py         the culprit as one record every command reports; the table of kinds
  configs.py         the compiler configuration as data
  record_format.py   records of frames that failed in Dynamo: the file format
  exitcodes.py       exit codes and the errors that map to them
  crash.py           naming a process that died: its signal and last words
  observer.py        progress: the library calls an observer, the CLI renders it
  limitations.py     Dynamo's documented limitations, recognised
  literals.py        values written into repro.py as source, bit for bit
  layout.py          the run folder's layout: every file a job writes, named once
  trust.py           the key that signs records (HMAC-SHA256)
  collectives.py     a graph's collectives: recorded on its rank, replayed in one process

``child/``: what runs inside the user's interpreter, installed at start-up by
``bootstrap/sitecustomize.py`` (its own docstring lists its modules).

The parent, tcompile's own process (never importing child/):

  runner.py          running a command under the hooks, once
  stdin.py           what the program reads on stdin, the same in every run of it
  collect.py         a finished run's events as graphs, failures and notes
  faithful.py        the passive run: checks never change the program's outcome
  dead.py            processes that died or hung, classified from what they left
  procs.py           every process of one run: found, asked, killed
  pool.py            persistent isolated workers that judge candidate graphs
  standby.py         workers started ahead, while the baseline runs; taken by a pool
  pycache.py         bytecode of tcompile's own interpreters, where the env forbids it
  forkserver.py      candidate programs forked from a process with torch imported
  capture_pool.py    the worker that judges candidate sources of a recorded frame
  probe.py           one run of the program under a configuration: does it fail?
  program.py         judging a candidate program (the program-level minify's oracle)
  trace.py           ``run --trace``: torch's structured trace of the run
  debug_artifacts.py inductor's debug artifacts per graph
  graph_io.py        FX graphs saved and loaded between processes, exactly
  snapshot.py        exact copies of the values a compiled graph is called with
  float64.py         the float64 reference of a graph
  autotune.py        a max-autotune failure names the choice that failed
  kernel_compile.py  the Triton kernel inductor cannot compile, alone
  kernel_trace.py    the Triton kernel behind a wrong value, traced

Boundary searches (bisect, the numerics search) use the minifier's one interval
search (``minifier/interval.py``); nothing else of the minifier but its Verdict.
"""
