"""tcompile.repro: the minify and report jobs, and the artifacts they make.

Jobs:

  minify_job.py         ``tcompile minify``: from a failing program to a verified repro.py
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
  program_files.py      a program split into files, as one
  shrink.py             a minimal graph's inputs, shrunk
  report.py             ``tcompile report``: a bug report for PyTorch's tracker
  pipelines.py          what bisect and minify run after their first job (the CLI composes nothing)
  triage.py             ``tcompile triage``: many scripts, cached, on a local pool or Ray
  triage_one.py         one script of a triage: verdict, culprit, verified repro
  triage_cluster.py     duplicates by culprit and minimal graph (pure)

Writers and what they write:

  artifacts.py          repro.py, smallest form first, written and verified
  writer.py             repro.py, the short form
  writer_full.py        repro.py, the long form (when the short one does not reproduce)
  snippets.py           the pieces a short repro.py is assembled from
  module.py             the minimal graph as ``class Repro(torch.nn.Module)``
  inputs.py             a repro's inputs as data, and the source that makes them
  capture_writer.py     repro.py for a capture failure
  program_harness.py    the harnesses of a program-level repro (generated text)
  kernel.py             the generated code beside the repro
  kernel_repro.py       kernel_repro.py: the one Triton kernel, launched alone
  launcher.py           minifier_launcher.py: format, writing, reading without executing
  launcher_template.py  the text of a generated minifier_launcher.py
  verify.py             running repro.py in a fresh interpreter that cannot import tcompile
  environment.py        versions and devices, for headers and bug reports
  triage_page.py        triage.md and triage.html
"""
