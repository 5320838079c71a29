"""How an Azure Pipelines build record becomes the row of a check run or status GitHub shows
queued or running (pure; the core calls AzureLookup.row)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.core.evidence import Judge, Since
from bot.core.model import Reconciliation, Row, Signal, State
from bot.sources.azure_pipelines.rules import FINAL_STATUS, LABEL, NAME, RESULTS, Build, BuildRef
from bot.sources.rows import aged, as_last_read, clock, unverified_row

_PRIVATE = frozenset({203, 401, 404})  # what Azure DevOps answers anonymous reads of a private one


@dataclass(frozen=True, slots=True)
class AzureLookup:
    """What Azure DevOps answered about the build one signal names (the last good record)."""

    ref: BuildRef
    head: str
    build: Build | None
    read_at: datetime | None
    failure: str | None = None
    failing_since: datetime | None = None
    status: int | None = None
    has_token: bool = False

    @property
    def project(self) -> str:
        """org/project, as Azure DevOps names them."""
        return f"{self.ref.org}/{self.ref.project}"

    def row(self, signal: Signal, *, number: int, since: Since, judge: Judge) -> Row:
        """The row of an Azure Pipelines check run or status of pull request `number`."""
        if self.build is None:
            return unverified_row(
                signal, since=since, judge=judge, provider=NAME, label=LABEL,
                project=self.project, failure=self._why(), failing_since=self.failing_since,
                fetched_at=self.read_at,
            )  # fmt: skip
        state, divergent, finding = _judged(self.build, self.head, signal, since, judge)
        finding += as_last_read(
            LABEL, failure=self.failure, failing_since=self.failing_since,
            read_at=self.read_at, judge=judge,
        )  # fmt: skip
        build = self.build
        rec = Reconciliation(
            provider=NAME,
            project=self.project,
            build_id=build.id,
            build_state=build.status,
            success=None if build.result is None else build.result == "succeeded",
            builds_for_commit=1 if build.builds(self.head) else 0,
            divergent=divergent,
            finding=finding,
            build_url=build.url,
            build_created=build.started,
            build_finished=build.finished,
            fetched_at=self.read_at,
            link_label="Azure build",
        )
        return Row(signal, state, since.at, since.source, rec, None)

    def note(self, *, number: int, judge: Judge) -> str:
        """Azure Pipelines gives no note about a head."""
        return ""

    def _why(self) -> str:
        failure = self.failure or "no answer"
        if self.status in _PRIVATE and not self.has_token:
            return (
                f"it shows no build {self.ref.build_id} without a token: the project is private "
                f"(set azure_pipelines.token), or the build does not exist ({failure})"
            )
        return failure


def _judged(
    build: Build, head: str, signal: Signal, since: Since, judge: Judge
) -> tuple[State, bool, str]:
    """The row's state, whether it diverges from GitHub, and what the build record says."""
    lead = f"{LABEL}: build {build.id}"
    if not build.builds(head):
        said = (
            f"{lead} is of commit {build.source_version[:7]}, not this head; "
            "it does not settle this check."
        )
        return aged(signal, since, judge), False, said
    if build.status != FINAL_STATUS:
        when = f" since {clock(build.started)}" if build.started else ""
        return aged(signal, since, judge, build.started), False, f"{lead} is {build.status}{when}."
    state = RESULTS.get(build.result or "", State.UNKNOWN)
    when = f" at {clock(build.finished)}" if build.finished else ""
    shown = signal.github_state.replace("_", " ")
    if state is State.UNKNOWN:
        said = f'{lead} completed{when} with result "{build.result}", which this bot does not map.'
    else:
        said = f"{lead} completed{when} with result {build.result}; GitHub still shows {shown}."
    return state, True, said
