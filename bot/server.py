"""The service's HTTP server: a Starlette app served by uvicorn in a background thread."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

log = logging.getLogger(__name__)


async def _livez(_: Request) -> Response:
    return PlainTextResponse("ok\n")


def build_app(extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The service's app: /livez plus the routes other parts of the bot contribute."""
    return Starlette(routes=[Route("/livez", _livez, methods=["GET"]), *extra_routes])


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers (the service owns SIGTERM/SIGINT)."""

    def install_signal_handlers(self) -> None:
        """Leave the process's signal handlers alone."""


class BackgroundServer:
    """A uvicorn server on its own thread and event loop; `stop()` ends it."""

    def __init__(self, app: Starlette, *, host: str, port: int) -> None:
        """Prepare (not start) a server of `app` on host:port (port 0 picks a free one)."""
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="off"
        )
        self._server = _Server(config)
        self._thread = threading.Thread(target=self._run, name="http-server", daemon=True)
        self.port = port

    def _run(self) -> None:
        asyncio.run(self._server.serve())

    def start(self, timeout_s: float = 10.0) -> BackgroundServer:
        """Start serving; returns once the socket is bound (raises if it never is)."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OSError(f"the HTTP server could not start on port {self.port}")
            time.sleep(0.02)
        servers = getattr(self._server, "servers", [])
        for server in servers:
            for sock in server.sockets:
                self.port = int(sock.getsockname()[1])
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, finish answers in flight (briefly), and join the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout=timeout_s)
