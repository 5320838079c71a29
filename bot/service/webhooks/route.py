"""The HTTP edge, `POST /webhook`: the body capped and read at most two large at a time, then
handed to the receiver in a thread; answered before any read of GitHub."""

from __future__ import annotations

import asyncio
import logging

import anyio.to_thread
from anyio import CapacityLimiter
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.service.webhooks.receiver import MAX_BODY_BYTES, Receiver

log = logging.getLogger(__name__)

LARGE_BODY_BYTES = 1024 * 1024  # bodies over 1 MB (or of unknown length) ...
MAX_LARGE_BODIES = 2  # ... are read at most two at a time (the others get 503 at once)
# Deliveries handled at once, each in a thread of its own pool: their state writes take one
# lock with the cycle's, so while a cycle writes they wait, and in the server's shared pool
# (40 threads) 100 deliveries a second took every thread the page's render needed.
HANDLER_THREADS = 8


def webhook_route(receiver: Receiver, path: str = "/webhook") -> Route:
    """The Starlette route of `POST /webhook`: body capped at 25 MB, answered before any read."""
    large = asyncio.Semaphore(MAX_LARGE_BODIES)
    handlers = CapacityLimiter(HANDLER_THREADS)

    async def endpoint(request: Request) -> Response:
        event = request.headers.get("x-github-event", "")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return _refused(receiver, event, 413, "too-large")
        if not declared.isdigit() or int(declared) > LARGE_BODY_BYTES:
            if large.locked():  # enough large bodies are being read at once
                return _refused(receiver, event, 503, "busy")
            async with large:
                body = await _read_capped(request)
        else:
            body = await _read_capped(request)
        if body is None:
            return _refused(receiver, event, 413, "too-large")
        headers = {k.lower(): v for k, v in request.headers.items()}
        answer = await anyio.to_thread.run_sync(receiver.handle, headers, body, limiter=handlers)
        return JSONResponse({"outcome": answer.outcome}, status_code=answer.status)

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ClientDisconnect:  # dropped by the server's deadline, or gone
            return Response(status_code=400)
        except Exception:
            log.exception("webhook: unexpected error (answered 500, no detail)")
            return JSONResponse({"outcome": "error"}, status_code=500)

    return Route(path, guarded, methods=["POST"])


def _refused(receiver: Receiver, event: str, status: int, outcome: str) -> Response:
    receiver.count(event, outcome)
    return JSONResponse({"outcome": outcome}, status_code=status)


async def _read_capped(request: Request) -> bytes | None:
    """The body, or None as soon as it passes MAX_BODY_BYTES (the rest is never read)."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)
