"""tcompile.repro: the minify job and the artifacts it makes.

minify_job.py    tcompile minify: find the failing graph, serve it, shrink it, write
launcher_job.py  minifying again from a minifier_launcher.py
verify.py        running repro.py in a fresh interpreter that cannot import tcompile
writer.py        repro.py
launcher.py      minifier_launcher.py (format, writing, reading without executing)
environment.py   versions and devices, for headers and bug reports
"""
