"""A naive REST poller, the baseline of benchmarks/cycle.py: per open PR, three PyGithub reads.

    python benchmarks/naive.py --github-url URL --token TOKEN --repo OWNER/NAME

For every open pull request it lists the head's check runs, reads the head's combined
status and lists the issue comments - what a simple bot built on PyGithub does each poll.
It writes nothing. PyGithub's own retries are off (retry=None): its default would sleep
until the rate-limit reset (up to an hour), so a rate limit ends the poll instead and is
reported. It prints one JSON line with what it read (pulls = pull requests fully read);
the requests themselves are counted by the sandbox.
"""

from __future__ import annotations

import argparse
import json
import sys

from github import Auth, Github
from github.GithubException import GithubException


def poll(github_url: str, token: str, repo_name: str) -> dict[str, object]:
    """Read every open pull request the naive way; counts of what was read."""
    gh = Github(
        auth=Auth.Token(token),
        base_url=github_url,
        lazy=True,
        seconds_between_requests=None,
        seconds_between_writes=None,
        per_page=100,
        retry=None,
    )
    repo = gh.get_repo(repo_name)
    counts = {"pulls": 0, "check_runs": 0, "statuses": 0, "comments": 0}
    try:
        for pull in repo.get_pulls(state="open"):
            commit = repo.get_commit(pull.head.sha)
            runs = sum(1 for _ in commit.get_check_runs())
            statuses = len(commit.get_combined_status().statuses)
            comments = sum(1 for _ in pull.get_issue_comments())
            counts["pulls"] += 1
            counts["check_runs"] += runs
            counts["statuses"] += statuses
            counts["comments"] += comments
    except GithubException as exc:
        if exc.status not in (403, 429):
            raise
        return {**counts, "rate_limited": True, "error": f"{exc.status}: {exc.data}"}
    return {**counts, "rate_limited": False}


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="naive.py", description=__doc__)
    parser.add_argument("--github-url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--repo", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(poll(args.github_url, args.token, args.repo)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
