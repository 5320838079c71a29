"""GitHubApi: everything the bot asks of GitHub, one facade over the parts that ask it.

Each part is a small class over one shared Transport (transport.py: REST and GraphQL,
retries, pacing on the rate limits, the errors of errors.py): account.py (the credential),
pulls.py (pull requests and their contexts), required.py (what is required, cached),
comments.py, commits.py (merge bases, other commits, merge queues) and runs.py (annotations,
attempts). Query text lives in query.py, parsing into the model in parse.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

from github import Github

from bot.core.base import MergeBase
from bot.core.merge_queue import QueueConfig
from bot.core.model import Annotation, PullSnapshot, RequiredChecks, Signal
from bot.core.summary import Usage
from bot.github.account import Account
from bot.github.comments import Comments, FirstComments, Until
from bot.github.commits import MERGE_BASE, BranchTips, Commits, Histories, Tips
from bot.github.parse import Comment, PullFailure
from bot.github.pulls import Pulls
from bot.github.required import Required
from bot.github.runs import Runs
from bot.github.transport import GITHUB_POLICY, MAX_INLINE_WAIT_S, Probe, Sleep, Transport
from bot.state.ports import RequiredCache


class GitHubApi:
    """Everything the bot asks of GitHub, through one PyGithub requester."""

    def __init__(
        self,
        gh: Github,
        *,
        page_size: int = 100,
        with_labels: bool = False,
        sleep: Sleep | None = None,
        max_attempts: int = GITHUB_POLICY.attempts,
        stop: threading.Event | None = None,
        max_inline_wait_s: float = MAX_INLINE_WAIT_S,
        comments_in_page: bool = False,
    ) -> None:
        """`max_inline_wait_s`: the longest rate-limit wait taken inline (a queue's worker
        takes none: the job waits on the queue instead, and the worker works others).
        `comments_in_page`: each page of open pull requests also reads their first comments
        (a run with no state: `pulls_comments` then starts from them, no second pass)."""
        transport = Transport(
            gh,
            sleep=sleep,
            max_attempts=max_attempts,
            stop=stop,
            max_inline_wait_s=max_inline_wait_s,
        )
        first = FirstComments()  # what a page of pull requests read of their comments
        tips = BranchTips()  # the base branches' newest commits the listing read
        self._transport = transport
        self._account = Account(transport, page_size=page_size)
        self._required = Required(transport)
        self._comments = Comments(transport, first)
        self._pulls = Pulls(
            transport,
            self._required,
            first,
            page_size=page_size,
            with_labels=with_labels,
            comments_in_page=comments_in_page,
            tips=tips,
        )
        self._commits = Commits(transport, tips)
        self._runs = Runs(transport)

    @property
    def usage(self) -> Usage:
        """What this client has spent (requests by kind, GraphQL points, what is left)."""
        return self._transport.usage

    @usage.setter
    def usage(self, usage: Usage) -> None:
        self._transport.usage = usage

    @property
    def stop(self) -> threading.Event:
        """Set to end every wait (retry, Retry-After, rate limit) at once."""
        return self._transport.stop

    # -- the credential --------------------------------------------------------------------

    def probe(self, path: str) -> Probe:
        """One REST read for check-config, never retried: what GitHub answered, errors included."""
        return self._account.probe(path)

    def viewer_login(self) -> str:
        """The login the token acts as, in REST's form (the bot's own comments carry it)."""
        return self._account.viewer_login()

    def installation_repositories(self) -> list[str]:
        """The repositories an installation token reaches, by full name."""
        return self._account.installation_repositories()

    # -- pull requests and what they require -------------------------------------------------

    def read_nodes(self, repo: str) -> Mapping[bytes, PullSnapshot]:
        """The pull requests of `repo` the last whole listing read, by their node's digest."""
        return self._pulls.read_nodes(repo)

    def keep_nodes(self, repo: str, nodes: Mapping[bytes, PullSnapshot]) -> None:
        """Pull requests an earlier process read from these nodes (not parsed again)."""
        self._pulls.keep_nodes(repo, nodes)

    def open_pulls(
        self, repo: str, *, now: datetime, required: RequiredCache | None = None
    ) -> Iterator[PullSnapshot | PullFailure]:
        """Every open pull request of `repo` with every context on its head, page by page."""
        return self._pulls.open_pulls(repo, now=now, required=required)

    def pulls_by_number(
        self,
        repo: str,
        numbers: Sequence[int],
        *,
        now: datetime,
        required: RequiredCache | None = None,
    ) -> dict[int, PullSnapshot | PullFailure]:
        """The open pull requests among `numbers`, by number (a webhook refresh)."""
        return self._pulls.pulls_by_number(repo, numbers, now=now, required=required)

    def pull(self, repo: str, number: int, *, now: datetime) -> PullSnapshot:
        """One pull request with every context on its head and what is required for it."""
        return self._pulls.pull(repo, number, now=now)

    def required_checks(self, repo: str, bases: Sequence[str]) -> dict[str, RequiredChecks]:
        """What each base branch requires (`read: False` with the reason where not known)."""
        return self._required.required_checks(repo, bases)

    # -- the comment -----------------------------------------------------------------------

    def list_comments(self, repo: str, number: int) -> list[Comment]:
        """Every comment of the pull request's conversation, oldest first."""
        return self._comments.list_comments(repo, number)

    def pulls_comments(
        self, repo: str, numbers: Sequence[int], *, until: Until | None = None
    ) -> dict[int, list[Comment]]:
        """The comments of these pull requests over GraphQL, each up to the first `until`
        accepts; one whose comments could not be read is left out."""
        return self._comments.pulls_comments(repo, numbers, until=until)

    def read_comments(self, node_ids: Sequence[str]) -> dict[str, Comment | None]:
        """Re-read comments by node id; None for one that no longer exists."""
        return self._comments.read_comments(node_ids)

    def get_comment(self, repo: str, comment_id: int) -> Comment | None:
        """Re-read one comment; None when it no longer exists."""
        return self._comments.get_comment(repo, comment_id)

    def create_comment(self, repo: str, number: int, body: str) -> Comment:
        """Create the comment. Never retried here: a lost answer may still have created it."""
        return self._comments.create_comment(repo, number, body)

    def edit_comment(self, repo: str, comment_id: int, body: str) -> Comment:
        """Edit the comment in place (an edit notifies nobody new)."""
        return self._comments.edit_comment(repo, comment_id, body)

    def delete_own_comment(self, repo: str, comment: Comment, *, login: str) -> None:
        """Delete one of the bot's own later comments (only one `login` wrote, marked)."""
        self._comments.delete_own_comment(repo, comment, login=login)

    # -- other commits ---------------------------------------------------------------------

    def branch_tips(self, repo: str, branches: Sequence[str]) -> Tips:
        """Each branch's newest commit (None: GitHub gave none): as the listing read it, else
        asked once, batched."""
        return self._commits.branch_tips(repo, branches)

    def merge_base(self, repo: str, base: str, head: str) -> str:
        """The merge-base commit of `base` (a branch's commit, or its name) and commit `head`
        (REST compare, one GET)."""
        return self._commits.merge_base(repo, base, head)

    def commits_signals(self, repo: str, shas: Sequence[str]) -> dict[str, MergeBase]:
        """The contexts GitHub reports on each commit (its first 100)."""
        return self._commits.commits_signals(repo, shas)

    def commits_and_queues(
        self,
        repo: str,
        shas: Sequence[str],
        branches: Sequence[str] = (),
        *,
        what: tuple[str, str] = MERGE_BASE,
    ) -> tuple[dict[str, MergeBase], dict[str, QueueConfig]]:
        """commits_signals' answer, and the merge queue of each of `branches`."""
        return self._commits.commits_and_queues(repo, shas, branches, what=what)

    def commit_statuses(self, repo: str, sha: str) -> list[Signal] | None:
        """Every state posted on the commit; None where GitHub holds more than one page."""
        return self._commits.commit_statuses(repo, sha)

    def branch_histories(self, repo: str, branches: Sequence[str]) -> Histories:
        """Each branch's last commits, newest first, with their contexts (or why not)."""
        return self._commits.branch_histories(repo, branches)

    # -- check runs ------------------------------------------------------------------------

    def check_run_annotations(self, node_ids: Sequence[str]) -> dict[str, tuple[Annotation, ...]]:
        """Each failing check run's failure-level annotations, by node id."""
        return self._runs.check_run_annotations(node_ids)

    def check_attempts(
        self, repo: str, asks: Sequence[tuple[str, str, int | None]]
    ) -> dict[int, list[Signal]]:
        """Every attempt GitHub keeps of each asked check (head, name, app id), by index."""
        return self._runs.check_attempts(repo, asks)
