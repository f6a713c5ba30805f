"""Issue 49's cases under two tcompiles: this checkout and an earlier commit.

    python benchmarks/verdicts_before_after.py [--old 47db09d] [--named-tcompile]

For each case -- every fixture of fixtures/user_bugs/ (the user's own bug: exit 3 is
right), the torchrun job whose rank fails after its teardown (exit 3), the one that hangs
at teardown after every rank returned (exit 0, with a note), the clean program with a
``torch.cond`` and a custom op (exit 0 under ``--accuracy``) -- ``tcompile run --json``
under each tcompile; prints a table of exit codes and verdicts.  The earlier commit is
checked out in a git worktree and imported from a package folder of symlinks
(``tcompile`` -> its ``pkg``, ``tcompile.cli`` -> its ``cli``, ...), first on the path.
``--named-tcompile``: both package folders, and a copy of the fixtures, under folders
named ``tcompile`` (the README's set-up in a clone of that name).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PACKAGES = {
    "pkg": "",
    "cli": "cli",
    "compiler": "compiler",
    "minifier": "minifier",
    "repro": "repro",
}


def package_folder(checkout: Path, dest: Path) -> Path:
    """``dest/tcompile`` made of symlinks into ``checkout``'s folders."""
    pkg = dest / "tcompile"
    pkg.mkdir(parents=True)
    for folder, name in PACKAGES.items():
        if name:
            (pkg / name).symlink_to(checkout / folder)
        else:
            for f in (checkout / folder).iterdir():
                (pkg / f.name).symlink_to(f)
    return dest


def cases(fixtures: Path) -> list[tuple[str, list[str], list[str]]]:
    """(name, tcompile's options, the command)."""
    out = [
        (f"user_bugs/{p.name}", [], [str(p)]) for p in sorted((fixtures / "user_bugs").glob("*.py"))
    ]
    for name in ("ddp_user_assert_after_teardown.py", "ddp_teardown_hang.py"):
        out.append((name, [], ["--", "torchrun", "--nproc-per-node", "2", str(fixtures / name)]))
    out.append(
        (
            "ops/handwritten_adam_item.py",
            ["--accuracy"],
            [str(fixtures / "ops" / "handwritten_adam_item.py")],
        )
    )
    return out


def run(site: Path, options: list[str], command: list[str], cwd: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TCOMPILE")}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from tcompile.cli.main import main; sys.argv[0] = 'tcompile'; main()",
         "run", "--json", *options, *command],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=900, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        return done.returncode, "(no document)"
    return done.returncode, str(doc.get("verdict"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", default="47db09d")
    parser.add_argument("--named-tcompile", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="verdicts-"))
    base = work / "tcompile" if args.named_tcompile else work
    worktree = base / "old"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-q", str(worktree), args.old], cwd=ROOT, check=True
    )
    try:
        sites = {
            "before": package_folder(worktree, base / "site-old"),
            "after": package_folder(ROOT, base / "site-new"),
        }
        fixtures = FIXTURES
        if args.named_tcompile:
            fixtures = base / "fixtures"
            shutil.copytree(FIXTURES, fixtures)
        print(f"| case | before ({args.old}) | after |\n|---|---|---|")
        for name, options, command in cases(fixtures):
            cwd = Path(command[-1]).parent
            row = []
            for which in ("before", "after"):
                code, verdict = run(sites[which], options, command, cwd)
                row.append(f"{code} {verdict}")
            print(f"| {name} {' '.join(options)} | {row[0]} | {row[1]} |", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
