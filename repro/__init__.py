"""tcompile.repro: the artifacts the jobs make, and the jobs (``jobs/``, its docstring
lists them: every command, one job each).

Writers never import a job; each writes once, atomically (``layout.write_file``).

Helpers the jobs use:

  program_files.py      a program split into files, as one
  project.py            the project a program belongs to: entry, roots, data files
  shrink.py             a minimal graph's inputs, shrunk (a format of the one search)
  triage_cluster.py     duplicates by culprit and minimal graph (pure)
  triage_verdict.py     a script's verdict in triage, one enum (pure)
  triage_records.py     triage's records: a script's result, its steps, checks, a cluster

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
  shareable.py          shared text without this machine's paths (report.md, the pages)
"""
