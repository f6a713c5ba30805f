"""``python -m tcompile``: the command line, as the ``tcompile`` script runs it (triage
starts it this way, with the interpreter it runs under)."""

from tcompile.cli.main import main

main()
