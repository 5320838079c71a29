"""What the base branch requires against what the head carries (pure).

GitHub's rollup lists only what reported: a required context that never reported (the UI's
"Expected — Waiting for status to be reported") is absent from it. Each such context becomes a
signal of kind `expected`, as does a name in `[[repos]] expected` that nothing carries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

from bot.core.model import CONFIGURATION, Kind, RequiredChecks, RequiredContext, Rule, Signal

# The key, among a pull request's first-seen times, of when the bot first knew its head without
# a context it expects (no signal key starts with a NUL).
HEAD_SEEN_KEY: Final = "\0head"
EXPECTED_STATE: Final = "expected"


STATUS_OF_UNKNOWN_APP = (
    "A commit status of this name is on the commit; GitHub does not say which app posted it."
)


def satisfies(signal: Signal, context: RequiredContext) -> bool:
    """Whether `signal` reports `context`: its name, and the app a ruleset names, if any.

    A commit status never satisfies a context a ruleset ties to an app: GitHub's answer does
    not say which app posted a status, so it cannot be shown to be that app's.
    """
    if signal.kind is Kind.EXPECTED or signal.name != context.name:
        return False
    if context.app_id is None:
        return True
    return signal.kind is Kind.CHECK_RUN and signal.app_id == context.app_id


def with_required(signals: Sequence[Signal], checks: RequiredChecks | None) -> list[Signal]:
    """Signals with `required` from the base branch's rules where GitHub's isRequired did not
    say (only once the rules were read: otherwise it stays unknown)."""
    if checks is None or not checks.read:
        return list(signals)
    return [
        s
        if s.required is not None
        else s._replace(required=any(satisfies(s, c) for c in checks.contexts))
        for s in signals
    ]


def expected_signals(
    signals: Sequence[Signal], checks: RequiredChecks | None, configured: Iterable[str] = ()
) -> list[Signal]:
    """One `expected` signal per required (or configured) name that nothing on the head reports.

    A name required by several rules is one signal naming every rule it still misses; a
    configured name is `required: False` once the rules were read (None while they were not).
    """
    missing: dict[str, list[RequiredContext]] = {}
    if checks is not None and checks.read:
        for context in checks.contexts:
            if not any(satisfies(s, context) for s in signals):
                missing.setdefault(context.name, []).append(context)
    found = [_expected(name, contexts, signals) for name, contexts in missing.items()]
    reported = {s.name for s in signals} | set(missing)
    required = False if checks is not None and checks.read else None
    for name in dict.fromkeys(configured):
        if name not in reported:
            found.append(
                Signal(
                    name,
                    Kind.EXPECTED,
                    EXPECTED_STATE,
                    required=required,
                    rules=(Rule(CONFIGURATION, ""),),
                )
            )
    return found


def _expected(name: str, contexts: list[RequiredContext], signals: Sequence[Signal]) -> Signal:
    app_id = next((c.app_id for c in contexts if c.app_id is not None), None)
    slug = next((s.app for s in signals if app_id is not None and s.app_id == app_id), None)
    rules = tuple(dict.fromkeys(rule for c in contexts for rule in c.rules))
    status = app_id is not None and any(s.kind is Kind.STATUS and s.name == name for s in signals)
    others = sorted(
        {s.app or f"the app with id {s.app_id}" for s in signals
         if s.kind is Kind.CHECK_RUN and s.name == name and s.app_id != app_id}
    )  # fmt: skip
    said = [STATUS_OF_UNKNOWN_APP] if status else []
    if others:  # the row names both apps
        required = slug or f"the app with id {app_id}"
        said.append(f"Required from {required}; reported by {' and '.join(others)}.")
    return Signal(
        name,
        Kind.EXPECTED,
        EXPECTED_STATE,
        app=slug,
        description=" ".join(said) or None,
        required=True,
        app_id=app_id,
        rules=rules,
    )


def rules_words(rules: Iterable[Rule], quote: Callable[[str], str] = str) -> str:
    """ "required by branch protection of main and ruleset Main", "expected by this bot's
    configuration"."""
    rules = list(rules)
    required = [r.words(quote) for r in rules if r.source != CONFIGURATION]
    parts = [f"required by {' and '.join(required)}"] if required else []
    if len(required) < len(rules):
        parts.append("expected by this bot's configuration")
    return "; ".join(parts)
