"""Publish a pass's plans: the only stage that writes comments.

Edits first, then attention first; each batch's comments re-read just before its writes (GitHub
has no compare-and-swap); writes paced (a gap between them, minute and hour budgets); a write
fenced by this replica's lease; a create never blind; every write recorded in the state; the
bot's own later comments deleted (never two); a dry run prints what it would write instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from bot.core.comment import Comment
from bot.core.summary import Summary
from bot.cycle.comments import Sightings, find_own
from bot.cycle.model import PRIORITY, Plan, Voice, sha256
from bot.github.client import GitHubApi
from bot.github.errors import GitHubError, RateLimited
from bot.github.ownership import last_edit_is_the_bots
from bot.progress import WriteProgress
from bot.render.stamp import generation_of
from bot.retry import Retryable, RetryPolicy, Stopped, pause, run_with_retries
from bot.settings import PolicySettings
from bot.state.ports import CycleState

log = logging.getLogger(__name__)

# Comments to be edited are re-read in batches (one GraphQL query each) just before the batch's
# writes; writes are >= 1 s apart, so a re-read is at most about this many seconds old.
REREAD_BATCH = 50
# A failed create is tried twice more, each time only after looking that it did not land.
CREATE_POLICY = RetryPolicy(attempts=3, backoff_s=1.0, jitter_s=1.0)
HOUR = timedelta(hours=1)
VERBS = {"create": "would create", "edit": "would edit", "leave": "would leave",
         "adopt": "would adopt"}  # fmt: skip


class WritePacing:
    """This process's comment writes on a monotonic clock: the gap between writes and the
    write budgets measure intervals on it, so a wall-clock step never stalls or rushes them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """No write yet."""
        self._clock = clock
        self._times: deque[float] = deque()
        self._lock = threading.Lock()

    def wrote(self) -> None:
        """A comment was created or edited now."""
        with self._lock:
            now = self._clock()
            self._times.append(now)
            while self._times and now - self._times[0] > HOUR.total_seconds():
                self._times.popleft()

    def since_last(self) -> float | None:
        """Seconds since this process's last write (None: none yet)."""
        with self._lock:
            return self._clock() - self._times[-1] if self._times else None

    def count_within(self, seconds: float) -> int:
        """How many writes this process made in the last `seconds`."""
        with self._lock:
            now = self._clock()
            return sum(1 for t in self._times if now - t <= seconds)


class LeaseLost(Exception):
    """A comment write refused: another replica works the repository now (fencing)."""


@dataclass(frozen=True)
class Desk:
    """What publishing needs besides GitHub and the state: how the comments are written,
    the policy's pacing, where a dry run prints, how to wait and whether to stop, this
    process's pacing, the lease (generation and fence), and the progress line."""

    voice: Voice
    policy: PolicySettings
    clock: Callable[[], datetime]
    stopping: Callable[[], bool]
    stop: threading.Event
    pacing: WritePacing
    generation: Callable[[str], int]
    out: Callable[[str], None] | None = None
    sleep: Callable[[float], None] | None = None  # None: wait on `stop`
    # the generation this replica may write under now (None: its lease is lost); None: one
    # process
    fence: Callable[[str], int | None] | None = None
    progress: Callable[[str], None] | None = None


class Publisher:
    """Writes what a pass planned, paced, fenced and recorded; never two comments."""

    def __init__(
        self, github: GitHubApi, store: CycleState, desk: Desk, sightings: Sightings
    ) -> None:
        self.github, self.store, self.desk, self.sightings = github, store, desk, sightings
        self.voice, self.policy, self.login = desk.voice, desk.policy, desk.voice.login

    def rendered(self, plan: Plan) -> Plan:
        """The plan with its comment body (rendered only when it is about to be written)."""
        generation = self.desk.generation(plan.report.repo)
        return replace(plan, body=self.voice.body(plan.report, generation))

    def show(self, plan: Plan) -> None:
        """A dry run's line (and body) of what it would do with one comment."""
        if self.desk.out is None or not self.voice.dry_run:
            return
        verb = VERBS[plan.action]
        text = f"== {plan.label}: {verb} the status comment (verdict {plan.report.verdict})"
        self.desk.out(text if plan.action in ("leave", "adopt") else f"{text}\n{plan.body}")

    def all(self, plans: Sequence[Plan], summary: Summary) -> None:
        """Write every plan: a stale comment of the bot's own is the worst lie, so edits
        first, then attention first; then delete the bot's own later comments."""
        ordered = sorted(
            plans, key=lambda p: (p.action != "edit", PRIORITY[p.report.verdict], p.label)
        )
        progress = WriteProgress(
            0 if self.voice.dry_run else len(ordered),
            gap_s=self.policy.min_seconds_between_writes,
            show=self.desk.progress,
        )
        try:
            self._each(ordered, summary, progress)
        finally:
            progress.finish()
        self.delete_later(summary)

    def _each(self, ordered: Sequence[Plan], summary: Summary, progress: WriteProgress) -> None:
        current: Mapping[str, Comment | None] = {}
        for index, plan in enumerate(ordered):
            if self.voice.dry_run:  # shown, and counted as what it would be
                self.show(self.rendered(plan))
                summary.created += plan.action == "create"
                summary.edited += plan.action == "edit"
                continue
            progress.wrote(index + 1)  # "comment 37 of 200": the one being written
            try:
                if index % REREAD_BATCH == 0 and self._has_write_budget():
                    current = self._reread(ordered[index : index + REREAD_BATCH])
                if self.desk.stopping() or not self._wait_for_write_budget():
                    summary.deferred = len(ordered) - index
                    log.info("write budget reached: %d writes deferred", summary.deferred)
                    return
                outcome = self.publish(self.rendered(plan), current=current)
            except RateLimited as exc:  # GitHub refused: this write and the rest are not made
                summary.rate_limited_s = exc.wait_s
                summary.refused = len(ordered) - index
                for left in ordered[index:]:
                    summary.failed[left.label] = f"not written: GitHub refused ({exc})"
                log.warning("rate limited while writing: %s", exc)
                return
            except Stopped:
                summary.deferred = len(ordered) - index
                log.info("stopping: %d writes deferred", summary.deferred)
                return
            except Exception as exc:  # isolate one pull request's failure
                summary.failed[plan.label] = f"{exc.__class__.__name__}: {exc}"
                log.debug("could not write the comment of %s", plan.label, exc_info=True)
                continue
            setattr(summary, outcome, getattr(summary, outcome) + 1)

    def delete_later(self, summary: Summary) -> None:
        """Never two comments: delete the bot's own comments found beside the one it keeps
        (marker AND its login, never another's), once that one was written or left; a pull
        request whose write failed, or a lease no longer held, keeps them for the next run."""
        later, self.sightings.later = self.sightings.later, {}
        fence = self.desk.fence
        for (repo, number), comments in sorted(later.items()):
            label = f"{repo}#{number}"
            if self.voice.dry_run:
                for comment in comments:
                    self._say(f"== {label}: would delete the bot's later comment {comment.id}")
                continue
            if label in summary.failed or (fence is not None and fence(repo) is None):
                continue
            for comment in comments:
                if self.desk.stopping() or not self._wait_for_write_budget():
                    return
                try:
                    self.github.delete_own_comment(repo, comment, login=self.login)
                except RateLimited as exc:
                    summary.rate_limited_s = exc.wait_s
                    return
                except GitHubError as exc:
                    log.warning("could not delete comment %d on %s: %s", comment.id, label, exc)
                    continue
                self.desk.pacing.wrote()
                summary.deleted += 1
                log.info("deleted the bot's later comment %d on %s (never two)", comment.id, label)

    def _say(self, text: str) -> None:
        if self.desk.out is not None:
            self.desk.out(text)

    def _reread(self, batch: Sequence[Plan]) -> Mapping[str, Comment | None]:
        """Re-read the comments this batch will edit, in one query (GitHub has no CAS).

        A rate limit is raised (the batch's writes are not made); another failure falls back
        to re-reading each comment over REST just before its edit.
        """
        ids = [p.node_id for p in batch if p.action == "edit" and p.node_id]
        try:
            return self.github.read_comments(ids)
        except RateLimited:
            raise
        except GitHubError as exc:  # fall back to re-reading each comment over REST
            log.warning("batched re-read failed, re-reading one by one: %s", exc)
            return {}

    # -- pacing ------------------------------------------------------------------------------

    def _has_write_budget(self) -> bool:
        now, last = self.desk.clock(), self.store.last_write_at()  # read once for both windows
        minute = self._writes_within(timedelta(minutes=1), now, last)
        return (
            minute < self.policy.max_writes_per_minute
            and self._writes_within(HOUR, now, last) < self.policy.max_writes_per_hour
        )

    def _writes_within(self, window: timedelta, now: datetime, last: datetime | None) -> int:
        """Writes in the last `window` before `now`: this process's on the monotonic clock; the
        state's (earlier processes') by their wall-clock stamps (the newest: `last`), unless
        the wall clock went back."""
        own = self.desk.pacing.count_within(window.total_seconds())
        if last is not None and last > now:  # the wall clock stepped back: stamps mislead
            return own
        return max(own, self.store.writes_since(now - window))

    def _wait_for_write_budget(self) -> bool:
        """Sleep to keep writes apart; False when the minute or hour budget is spent."""
        if not self._has_write_budget():
            return False
        least = self.policy.min_seconds_between_writes
        since = self.desk.pacing.since_last()
        if since is None:  # no write by this process yet: the state's last stamp, bounded
            last = self.store.last_write_at()
            since = least if last is None else (self.desk.clock() - last).total_seconds()
        gap = min(least, least - since)  # a clock step never makes a wait longer than `least`
        if gap > 0:
            self._pause(gap)
        return True

    def _pause(self, seconds: float) -> None:
        """Wait; raise Stopped as soon as a stop is requested."""
        if self.desk.sleep is None:
            pause(seconds, self.desk.stop)
        else:
            self.desk.sleep(seconds)
        if self.desk.stopping():
            raise Stopped("stopped while waiting to write")

    # -- one comment -------------------------------------------------------------------------

    def publish(self, plan: Plan, *, current: Mapping[str, Comment | None] | None = None) -> str:
        """Write one planned comment; returns "created", "edited" or "left".

        `current` holds comments already re-read in a batch, by node id; any other comment
        to edit is re-read here, over REST, just before the edit.
        """
        repo, number = plan.report.repo, plan.report.number
        if plan.comment_id is not None:
            reread = current or {}
            if plan.node_id in reread:
                existing = reread[plan.node_id]
            else:
                existing = self.github.get_comment(repo, plan.comment_id)
            if existing is not None and existing.author == self.login:
                return self._edit_or_keep(plan, existing)  # marker or not: the bot's, restored
            self.store.forget_comment(repo, number)
        own = plan.found if plan.looked and plan.comment_id is None else self._find_own(plan)
        if own is not None:
            return self._edit_or_keep(plan, own)
        self.record(plan, self._create(plan), "created")
        return "created"

    def _find_own(self, plan: Plan) -> Comment | None:
        repo, number = plan.report.repo, plan.report.number
        return find_own(self.github, self.sightings, repo, number, login=self.login)

    def _create(self, plan: Plan) -> Comment:
        """Create the comment; after a failed create, look, and create again only when the
        comment is absent (bounded by CREATE_POLICY, never blind). A refusal (4xx, a rate
        limit) is not tried again."""
        repo, number = plan.report.repo, plan.report.number

        def attempt() -> Comment:
            self._check_fence(plan, None)
            try:
                return self.github.create_comment(repo, number, plan.body)
            except RateLimited:
                raise
            except GitHubError as exc:
                # The create may have landed although the answer was lost: look first.
                own = self._find_own(plan)
                if own is not None:
                    return own
                if exc.status is not None and exc.status < 500:
                    raise
                raise Retryable(exc) from exc

        return run_with_retries(
            attempt, policy=CREATE_POLICY, stop=self.desk.stop, sleep=self._pause, what="create"
        )

    def _edit_or_keep(self, plan: Plan, current: Comment) -> str:
        if current.body == plan.body:
            self.record(plan, current, "adopted")
            return "left"
        self._check_fence(plan, current)
        self.github.edit_comment(plan.report.repo, current.id, plan.body)
        self.record(plan, current, "edited")
        return "edited"

    def _check_fence(self, plan: Plan, current: Comment | None) -> None:
        """Raise LeaseLost unless this replica still holds the repository's lease, under the
        generation the body carries, and the comment is not stamped by a newer one."""
        if self.desk.fence is None:
            return
        held = self.desk.fence(plan.report.repo)
        if held is None:
            raise LeaseLost(f"{plan.label}: the lease of {plan.report.repo} is not held")
        if generation_of(plan.body) not in (None, held):
            raise LeaseLost(f"{plan.label}: rendered under another lease generation")
        epoch = self.voice.epoch
        stamped = None if current is None else generation_of(current.body, epoch=epoch)
        if stamped is not None and stamped > held and current is not None:
            if self._edited_by_the_bot(current):
                raise LeaseLost(
                    f"{plan.label}: the comment is stamped by generation {stamped}, newer than "
                    f"{held}"
                )
            log.info(
                "%s: the comment's stamp is not the bot's (someone else edited it last): "
                "restored whatever it says",
                plan.label,
            )

    def _edited_by_the_bot(self, comment: Comment) -> bool:
        """Whether GitHub attributes the comment's last edit to the bot (asked of GraphQL when
        the comment was read over REST; what cannot be asked is not the bot's edit)."""
        known = last_edit_is_the_bots(comment, self.login)
        if known is not None or not comment.node_id:
            return bool(known)
        try:
            read = self.github.read_comments([comment.node_id]).get(comment.node_id)
        except RateLimited:
            raise
        except GitHubError as exc:
            log.warning("could not read who last edited comment %d: %s", comment.id, exc)
            return False
        return read is not None and bool(last_edit_is_the_bots(read, self.login))

    def record(self, plan: Plan, comment: Comment, action: str) -> None:
        """Record a comment written (or adopted: nothing written to GitHub) in the state."""
        comment_id = comment.id
        if action != "adopted":  # an adoption writes nothing to GitHub
            self.desk.pacing.wrote()
        self.store.record_write(
            plan.report.repo,
            plan.report.number,
            comment_id=comment_id,
            node_id=comment.node_id or plan.node_id,
            body_hash=sha256(plan.body),
            facts_key=plan.comment_key,
            observed_at=plan.report.observed_at,
            head_sha=plan.report.head_sha,
            action=action,  # type: ignore[arg-type]
            now=self.desk.clock(),
        )
        log.info(
            "comment %s on %s",
            action,
            plan.label,
            extra={"repo": plan.report.repo, "pr": plan.report.number, "comment_id": comment_id},
        )
