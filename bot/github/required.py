"""Which checks are required: per (base branch, name) learned from GitHub's isRequired, and
per base branch from branch protection and rulesets (with the apps protection pins them to),
both kept in the state's RequiredCache between cycles."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import quote

from bot.core.model import BRANCH_PROTECTION, RequiredChecks, Signal
from bot.github.answer import alias_of, field, in_alias, in_ref
from bot.github.errors import GitHubError, PaginationLoop, RateLimited, stable_message
from bot.github.parse import (
    Partial,
    Unreadable,
    parse_pins,
    parse_required,
    required_of,
    with_pins,
)
from bot.github.query import ALIAS_BATCH, more_contexts_query, required_sets_query
from bot.github.transport import Transport
from bot.guard import Pages
from bot.state.ports import REQUIRED_SETS_KEPT, RequiredCache

log = logging.getLogger(__name__)

Pair = tuple[str, str]  # (base branch, check or status name)
Asked = tuple[Partial, str | None]  # a pull request and the cursor of its next contexts page


def required_of_ref(base: str, node: Any, errors: list[dict[str, Any]]) -> RequiredChecks:
    """What a base branch requires, from its Ref and the errors GitHub gave on it."""
    if errors:
        error = f"GitHub answered on the rules of {base}: {stable_message(errors[0])}"
        return RequiredChecks(base, read=False, error=error)
    try:
        return parse_required(base, node)
    except Unreadable as exc:
        return RequiredChecks(base, read=False, error=str(exc))


def _required(signal: Signal, flag: bool | None) -> Signal:
    """The signal with this `required` (the same object when it already has it)."""
    return signal if signal.required is flag else signal._replace(required=flag)


def _to_learn(
    partials: list[Partial], known: dict[Pair, bool | None]
) -> list[tuple[Partial, set[str]]]:
    """The pull requests to ask isRequired of, each with the names only it brings (a pair is
    asked of one pull request only)."""
    chosen: list[tuple[Partial, set[str]]] = []
    todo: set[Pair] = set()
    for p in partials:
        if p.base is None or p.failure is not None:
            continue
        names = {s.name for s in p.signals} - {n for b, n in known if b == p.base}
        names -= {n for b, n in todo if b == p.base}
        if names:
            chosen.append((p, names))
            todo |= {(p.base, n) for n in names}
    return chosen


class Required:
    """Which checks are required, read from GitHub and kept in the cache."""

    def __init__(self, transport: Transport) -> None:
        """Over `transport`."""
        self._transport = transport

    # -- required-ness: learned per (base branch, name), cached ---------------------------

    def fill(
        self, repo: str, partials: list[Partial], cache: RequiredCache, *, now: datetime
    ) -> None:
        """Set each signal's `required` from the cache, learning unknown pairs first."""
        bases = {p.base for p in partials if p.base}
        known = cache.required_known(repo, bases, now=now)
        chosen = _to_learn(partials, known)
        if chosen:
            owner, name = repo.split("/", 1)
            try:
                learned = self._learn(owner, name, chosen)
            except RateLimited:
                raise
            except GitHubError as exc:  # the last answers stand; else unknown, never made up
                log.warning("could not learn which checks are required in %s: %s", repo, exc)
                learned = {}
                known = {**cache.required_known(repo, bases, now=now, max_age=None), **known}
            if learned:
                cache.remember_required(repo, learned, now=now)
            known = {**known, **learned}
        by_base: dict[str, dict[str, bool | None]] = {}
        for (base, name), flag in known.items():
            by_base.setdefault(base, {})[name] = flag
        for p in partials:
            flags = by_base.get(p.base or "", {})
            p.signals = [_required(s, flags.get(s.name)) for s in p.signals]

    def _learn(
        self, owner: str, name: str, chosen: list[tuple[Partial, set[str]]]
    ) -> dict[Pair, bool | None]:
        """Ask isRequired through per-PR aliases, for the pull requests covering unknown pairs."""
        learned: dict[Pair, bool | None] = {}
        failed: set[int] = set()
        asking: list[Asked] = [(p, None) for p, _ in chosen]
        pages = {p.snapshot.number: Pages("the required contexts", error=PaginationLoop)
                 for p, _ in chosen}  # fmt: skip
        while asking:
            following: list[Asked] = []
            for start in range(0, len(asking), ALIAS_BATCH):
                chunk = asking[start : start + ALIAS_BATCH]
                following += self._learn_chunk(owner, name, chunk, learned, failed, pages)
            asking = following
        for p, names in chosen:  # asked and answered, but GitHub did not say: not asked again
            if p.snapshot.number not in failed:
                for n in names:
                    learned.setdefault((p.base or "", n), None)
        return learned

    def _learn_chunk(
        self,
        owner: str,
        name: str,
        chunk: list[Asked],
        learned: dict[Pair, bool | None],
        failed: set[int],
        pages: dict[int, Pages],
    ) -> list[Asked]:
        """One aliased query's isRequired into `learned` (the pull requests it failed for into
        `failed`); the pull requests whose contexts have a next page, at its cursor."""
        variables: dict[str, Any] = {"owner": owner, "name": name}
        for i, (p, cursor) in enumerate(chunk):
            variables[f"o{i}"] = p.snapshot.head_sha  # the commit the report is of
            variables[f"n{i}"] = p.snapshot.number
            variables[f"c{i}"] = cursor
        query = more_contexts_query(len(chunk), required=True)
        data, errors = self._transport.query(query, variables, tolerate=in_alias)
        broken = {alias_of(e) for e in errors}
        following: list[Asked] = []
        for i, (p, _) in enumerate(chunk):
            conn = field(data, "repository", f"p{i}", "statusCheckRollup", "contexts")
            if f"p{i}" in broken or not isinstance(conn, dict):
                failed.add(p.snapshot.number)
                continue
            base = p.base or ""
            learned.update({(base, n): flag for n, flag in required_of(conn).items()})
            if field(conn, "pageInfo", "hasNextPage"):
                cursor = field(conn, "pageInfo", "endCursor")
                following.append((p, pages[p.snapshot.number].follow(cursor)))
        return following

    # -- what base branches require: protection and rulesets, cached per base -------------

    def attach(
        self,
        repo: str,
        partials: list[Partial],
        cache: RequiredCache | None,
        *,
        now: datetime,
        known: dict[str, RequiredChecks] | None = None,
    ) -> None:
        """Give each pull request what its base branch requires: from `known`, the cache, or
        one query for every base branch neither knows."""
        known = {} if known is None else known
        bases = sorted({p.base for p in partials if p.base and p.failure is None} - set(known))
        if bases and cache is not None:
            known.update(cache.required_sets(repo, bases, now=now))
        missing = [b for b in bases if b not in known]
        if missing:
            known.update(self._read_sets(repo, missing, cache, now=now))
        for p in partials:
            p.required_checks = known.get(p.base) if p.base else None

    def _read_sets(
        self, repo: str, bases: list[str], cache: RequiredCache | None, *, now: datetime
    ) -> dict[str, RequiredChecks]:
        """What `bases` require, read from GitHub and recorded in the cache; where a read
        fails, the set last read stands (what could not be read is asked again next time)."""
        read = self.required_checks(repo, bases)
        if cache is None:
            return read
        cache.remember_required_sets(repo, {b: r for b, r in read.items() if r.read}, now=now)
        failed = [b for b, r in read.items() if not r.read]
        last = cache.required_sets(repo, failed, now=now, max_age=REQUIRED_SETS_KEPT)
        for base in sorted(last):  # a failed read is no new fact: the last set stands
            log.warning("%s: the required checks of %s stand as last read", repo, base)
        return read | last

    def required_checks(self, repo: str, bases: Sequence[str]) -> dict[str, RequiredChecks]:
        """What each base branch requires, read in one query per ALIAS_BATCH branches; a branch
        whose rules GitHub refuses (or a query that fails) is `read: False` with the reason."""
        owner, name = repo.split("/", 1)
        found: dict[str, RequiredChecks] = {}
        for start in range(0, len(bases), ALIAS_BATCH):
            chunk = list(bases[start : start + ALIAS_BATCH])
            variables: dict[str, Any] = {"owner": owner, "name": name}
            variables |= {f"b{i}": f"refs/heads/{b}" for i, b in enumerate(chunk)}
            try:
                data, errors = self._transport.query(
                    required_sets_query(len(chunk)), variables, tolerate=in_ref
                )
            except RateLimited:
                raise
            except GitHubError as exc:
                log.warning("could not read the required checks of %s: %s", repo, exc)
                found |= {b: RequiredChecks(b, read=False, error=exc.reason) for b in chunk}
                continue
            for i, base in enumerate(chunk):
                mine = [e for e in errors if alias_of(e) == f"b{i}"]
                node = field(data, "repository", f"b{i}") if not mine else None
                found[base] = self.pinned(repo, required_of_ref(base, node, mine))
        return found

    def pinned(self, repo: str, checks: RequiredChecks) -> RequiredChecks:
        """Branch protection's contexts tied to the app it pins each to ("expected source"):
        GraphQL gives names only, REST's branch answer (read access) gives `checks[].app_id`.
        Asked only where branch protection requires something; where it cannot be read, the
        set says so (`pins_error`) and its names stand unpinned."""
        if not checks.read or not any(
            rule.source == BRANCH_PROTECTION for c in checks.contexts for rule in c.rules
        ):
            return checks
        path = f"/repos/{repo}/branches/{quote(checks.base, safe='')}"
        try:
            _, data = self._transport.send("GET", path, kind="rest_get")
            return with_pins(checks, parse_pins(data))
        except RateLimited:
            raise
        except GitHubError as exc:
            log.warning(
                "%s: the apps required checks of %s are pinned to: %s", repo, checks.base, exc
            )
            return replace(checks, pins_error=exc.reason or str(exc))
        except Unreadable as exc:
            return replace(checks, pins_error=str(exc))
