"""What the bot's credential is: the login it acts as, the repositories an installation
reaches, and check-config's raw probes."""

from __future__ import annotations

from bot.github.answer import field
from bot.github.errors import GitHubError, MalformedAnswer, PaginationLoop, RateLimited
from bot.github.parse import normal_login
from bot.github.query import VIEWER_QUERY
from bot.github.transport import Probe, Transport
from bot.guard import MAX_PAGES


class Account:
    """The reads about the credential itself."""

    def __init__(self, transport: Transport, *, page_size: int = 100) -> None:
        """Over `transport`; `page_size` repositories a page of an installation's list."""
        self._transport = transport
        self._page_size = page_size

    def probe(self, path: str) -> Probe:
        """One REST read for check-config, never retried: what GitHub answered, errors included."""
        return self._transport.probe(path)

    def viewer_login(self) -> str:
        """The login the token acts as, in REST's form (the bot's own comments carry it).

        `GET /user`; an installation token (a workflow's GITHUB_TOKEN, an App's token) is
        refused it (403) but has a GraphQL `viewer`, which is asked then.
        """
        try:
            _, data = self._transport.send("GET", "/user", kind="rest_get")
        except GitHubError as exc:
            if exc.status != 403 or isinstance(exc, RateLimited):
                raise
            viewer = field(self._transport.graphql(VIEWER_QUERY, {}), "viewer")
            data = {"login": normal_login(field(viewer, "login"), field(viewer, "__typename"))}
        login = field(data, "login")
        if not isinstance(login, str):
            raise MalformedAnswer("GitHub did not say the token's login")
        return login

    def installation_repositories(self) -> list[str]:
        """The repositories an installation token reaches (`GET /installation/repositories`,
        every page), by full name."""
        names: list[str] = []
        for page in range(1, MAX_PAGES + 1):
            params = {"per_page": self._page_size, "page": page}
            _, data = self._transport.send(
                "GET", "/installation/repositories", kind="rest_get", parameters=params
            )
            found = data.get("repositories") if isinstance(data, dict) else None
            if not isinstance(found, list):
                raise MalformedAnswer("GitHub's installation repositories are not a list")
            names += [r["full_name"] for r in found if isinstance(r.get("full_name"), str)]
            total = data.get("total_count")
            if not found or (isinstance(total, int) and len(names) >= total):
                return names
        raise PaginationLoop("GitHub's installation repositories ran past the page bound")
