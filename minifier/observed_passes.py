"""Program passes from what one run of the candidate showed (observe.py's facts):
loops written out as they ran, each ``if`` to the side taken, values as fresh tensors
of the observed shape.  The oracle's side runs the instrumented candidate
(``Hints.observe``); without it these passes propose nothing."""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any

from .dead_code import remove_dead_code
from .observe import assigned, driver, facts_keys, fresh_tensor
from .source_case import Hints, Proposal, Proposals, Search, fresh_name, names_in, replace_stmt

MAX_UNROLL = 4  # a loop that ran more often is cut by the number passes first


def _facts(
    best: str, hints: Hints, acts_on: Callable[[ast.stmt], bool]
) -> tuple[list[ast.stmt], dict[str, dict[int, Any]]] | None:
    """The driver's statements and what one run showed of them; None (and no
    instrumented run) when no statement is one the pass ``acts_on``."""
    stmts = driver(ast.parse(best))
    if hints.observe is None or not any(acts_on(st) for st in stmts):
        return None
    got = hints.observe(best)
    return (stmts, facts_keys(got)) if got else None


def _own_exits(body: list[ast.stmt]) -> bool:
    """A ``break`` or ``continue`` of this loop (not of a loop nested in it)."""
    todo = list(body)
    while todo:
        st = todo.pop()
        if isinstance(st, (ast.Break, ast.Continue)):
            return True
        if isinstance(st, (ast.For, ast.While, ast.FunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            todo.extend(getattr(st, field, []) or [])
        for h in getattr(st, "handlers", []) or []:
            todo.extend(h.body)
    return False


def observed_loops(search: Search, best: str, hints: Hints) -> Proposals:
    """A driver loop written out as many times as the run entered its body (at most
    MAX_UNROLL): ``while step < n:`` -> its body twice; ``for x, y in batches():`` ->
    ``x, y = next(it)`` and the body, each time.  A loop the run never entered goes.
    The copies are then judged apart: the next run says which ``if`` each one took and
    what each bound (observed_branches, observed_values)."""
    got = _facts(best, hints, lambda st: isinstance(st, (ast.For, ast.While)))
    if got is None:
        return
    stmts, facts = got
    for i in range(len(stmts)):
        cand = ast.parse(best)
        st = driver(cand)[i]
        if not isinstance(st, (ast.For, ast.While)) or st.orelse or _own_exits(st.body):
            continue
        n = facts["loops"].get(i, {}).get("n", 0)
        if n > MAX_UNROLL:
            continue
        item = facts["loops"].get(i, {})
        made = fresh_tensor(item.get("spec", {})) if item.get("same") else None
        tries: list[list[ast.stmt]] = []
        if isinstance(st, ast.For) and n and made is not None:
            # the items as fresh tensors of the observed shape: the iterable goes too
            fresh = ast.Assign([copy.deepcopy(st.target)], ast.parse(made, mode="eval").body)
            tries.append([s for _ in range(n) for s in (fresh, *st.body)])
        if isinstance(st, ast.For) and n:
            it = fresh_name(names_in(cand), "it")
            new: list[ast.stmt] = [ast.parse(f"{it} = iter({ast.unparse(st.iter)})").body[0]]
            step = ast.Assign(
                [copy.deepcopy(st.target)], ast.parse(f"next({it})", mode="eval").body
            )
            tries.append(new + [s for _ in range(n) for s in (step, *st.body)])
        elif isinstance(st, ast.While) or not n:
            tries.append([s for _ in range(n) for s in st.body])
        for body in tries:
            one = ast.parse(best)
            target = driver(one)[i]
            if replace_stmt(one, target, [copy.deepcopy(s) for s in body] or [ast.Pass()]):
                ast.fix_missing_locations(one)
                remove_dead_code(one, set(), hints.raising)  # the data class it no longer uses
                yield Proposal(one, f"loop written out ({n} time(s), as the run went)", True)


def _all_then_each(picks: list[Any]) -> list[list[Any]]:
    """All the picks as one candidate, then each alone (none: no candidate)."""
    return ([picks] if picks else []) + ([[p] for p in picks] if len(picks) > 1 else [])


def observed_branches(search: Search, best: str, hints: Hints) -> Proposals:
    """Each driver ``if`` -> the side the run took every time (or nothing, where the
    run never reached it): all of them at once, then one at a time."""
    got = _facts(best, hints, lambda st: isinstance(st, ast.If))
    if got is None:
        return
    stmts, facts = got
    picks: list[tuple[int, str]] = []
    for i, st in enumerate(stmts):
        if isinstance(st, ast.If):
            body, other = facts["ifs"].get(i, [0, 0])
            if body and other:
                continue
            picks.append((i, "body" if body else "orelse" if other else ""))
    for group in _all_then_each(picks):
        cand = ast.parse(best)
        nodes = driver(cand)
        done = 0
        for i, side in sorted(group, reverse=True):  # inner ones before the ifs holding them
            kept = getattr(nodes[i], side) if side else []
            done += replace_stmt(cand, nodes[i], kept or [ast.Pass()])
        if done:
            what = "each if" if len(group) > 1 else "an if"
            yield Proposal(cand, f"{what} -> the side the run took")


_CONSTRUCTORS = {"randn", "rand", "randint", "zeros", "ones", "full", "empty", "arange", "tensor"}


def _made_by_autograd(spec: dict[str, Any]) -> bool:
    """A value computed from parameters (it has a ``grad_fn``): a fresh leaf in its place
    cuts the graph a backward needs -- almost never the same failure, never worth a run."""
    return bool(spec.get("made")) or any(_made_by_autograd(s) for s in spec.get("seq", []))


def _fresh_already(value: ast.expr) -> bool:
    """``torch.randn(4, 8)`` and the like, with literal arguments: nothing to gain."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _CONSTRUCTORS
        and all(isinstance(a, ast.Constant) or _constant(a) for a in value.args)
    )


def observed_values(search: Search, best: str, hints: Hints) -> Proposals:
    """A driver assignment whose value was a tensor (or a tuple of them), the same
    shape and type each time, not computed by autograd and not a constructor already ->
    a fresh random tensor like it: data loading, a dataset's
    generator, a batch from an iterator become ``torch.randn``/``torch.randint`` of the
    observed shape, dtype and range.  All at once, then one at a time."""
    got = _facts(
        best,
        hints,
        lambda st: assigned(st) is not None and not _fresh_already(st.value),  # type: ignore[attr-defined]
    )
    if got is None:
        return
    stmts, facts = got
    picks: list[tuple[int, str]] = []
    for i, st in enumerate(stmts):
        seen = facts["values"].get(i)
        if assigned(st) is None or not seen or not seen.get("same"):
            continue
        if _made_by_autograd(seen["spec"]) or _fresh_already(st.value):  # type: ignore[attr-defined]
            continue
        made = fresh_tensor(seen["spec"])
        if made is not None and ast.unparse(st.value) != ast.unparse(ast.parse(made).body[0]):  # type: ignore[attr-defined]
            picks.append((i, made))
    for group in _all_then_each(picks):
        cand = ast.parse(best)
        nodes = driver(cand)
        for i, made in group:
            nodes[i].value = ast.parse(made, mode="eval").body  # type: ignore[attr-defined]
        ast.fix_missing_locations(cand)
        remove_dead_code(cand, set(), hints.raising)  # what made the values, if unused now
        what = "values" if len(group) > 1 else "a value"
        yield Proposal(cand, f"{what} -> fresh tensor(s) of the observed shape")


def _constant(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True
