"""tcompile.repro.jobs: every command, one job each, in one place.

A job runs the user's program (through compiler/'s runner and oracle), searches
(minifier/) and writes artifacts (the writers of repro/, the package above); it returns
a typed report the CLI renders.  Jobs sit above everything else: nothing outside cli/
imports a job, and a job
that follows another (bisect then minify, minify then report) is chained by
pipelines.py, not by the CLI.

``tcompile run`` and ``tcompile bisect``:

  classify.py           ``tcompile run``: every graph, every failure
  run_record.py         a run's record (RunReport), read back for ``report --baseline``
  flaky.py              a failure that does not come back: what each run showed
  owned.py              an error in a compiler part's own words: that part off first
  bisection.py          ``tcompile bisect``: stage, graph, pass, application
  capture_bisect.py     bisect on the failing graph the baseline saved; one run confirms
  capture_result.py     its answer in bisect's words and fields (confirmed or not)
  bisect_report.py      bisect's report, as the CLI renders it
  guided.py             bisect's first guesses, at the culprit op's applications
  peers.py              the nodes of one distributed job bisecting together

``tcompile replay``, ``explain``, ``merge``:

  replay.py             re-run only the recorded frame
  explain.py            breaks, recompiles, compile time
  merge.py              one distributed job's runs, one per node

``tcompile minify``, a pipeline of start cases (the first failing worker, a rank's
capture, a launcher, a record, the program):

  minify_job.py         from a failing program to a verified repro.py
  minify_target.py      which failure minify works on (``--graph``, the first, a rank's)
  minify_graph.py       the graph search, from a worker that serves the graph
  minify_search.py      the two searches (graph, inputs) behind the workers' oracle
  minify_types.py       the job's state and outcome (minify's ``--json``)
  dist_minify.py        a failing graph of one rank of a distributed job
  launcher_job.py       minifying again from a minifier_launcher.py
  capture_job.py        a capture failure: the frame's function, shrunk
  source_level.py       ``--level source``: the failing graph's frame as source
  program_job.py        program-level minify: the user's script, shrunk
  program_baseline.py   the program level's start: what runs, and the target
  program_output.py     the program level's repro: its text, the files it carries

``tcompile report`` and ``triage``, and what runs after a job:

  report.py             a bug report for PyTorch's tracker
  triage.py             many scripts, cached, on a local pool or Ray
  triage_loop.py        bisect and minify once per cluster: who is reported, who checked
  triage_propose.py     which representatives a script is checked against; who may be one bug
  triage_one.py         one script of a triage: its runs, its report, a membership check
  triage_capture.py     a membership check on the script's captured graph (capture_check.py)
  capture_check.py      the compiles of that check (several switches, one worker), in a child
  triage_ray.py         triage's pieces as Ray tasks: a shared filesystem, a node lost
  triage_switch.py      duplicates checked by running: another cluster's culprit off
  pipelines.py          what bisect and minify run after their first job (the CLI composes nothing)
"""
