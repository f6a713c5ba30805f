"""tcompile.cli: parse, call a job, render.

main.py           the ``tcompile`` command line: parses, calls a job, renders
minify_cmd.py     ``tcompile minify``: which minify the arguments ask for
triage_cmd.py     ``tcompile triage``: a folder of bug scripts, triaged
tools.py          the commands that run no program (``env``, ...)
app.py            the command group; one path from a job to output and exit code
options.py        the options commands share, declared once
flags.py          each command's options as one typed record (app.flags)
args.py           SCRIPT [ARGS] or -- COMMAND [ARGS], checked once
render.py         rich rendering of results and progress
render_bisect.py  rich rendering of a bisect's result
render_replay.py  rich rendering of explain and replay results
render_triage.py  rich rendering of a triage
launch.py         entry point of a generated minifier_launcher.py
"""
