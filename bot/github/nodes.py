"""A page of open pull requests with each node left as its raw JSON text, and a digest of a
node that says whether it is new: only a new node is decoded and parsed (most of a warm
cycle's are not)."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import orjson

from bot.github.transport import decode_json


class _Pulls(msgspec.Struct):
    """A pullRequests connection, its nodes left as their JSON text."""

    nodes: list[msgspec.Raw] | msgspec.UnsetType | None = msgspec.UNSET
    pageInfo: Any = msgspec.UNSET
    totalCount: Any = msgspec.UNSET


class _PullsRepository(msgspec.Struct):
    pullRequests: _Pulls | msgspec.UnsetType | None = msgspec.UNSET


class _PullsData(msgspec.Struct):
    repository: _PullsRepository | msgspec.UnsetType | None = msgspec.UNSET
    rateLimit: Any = msgspec.UNSET
    tips: Any = msgspec.UNSET  # the base branches' newest commits (the first page's)


class _PullsAnswer(msgspec.Struct):
    data: _PullsData | msgspec.UnsetType | None = msgspec.UNSET
    errors: Any = msgspec.UNSET


_PULLS_ANSWER = msgspec.json.Decoder(_PullsAnswer)


def _present(struct: Any) -> Any:
    """A decoded struct as the dict orjson would give (absent fields absent), nodes raw."""
    if not isinstance(struct, msgspec.Struct):
        return struct
    return {
        name: _present(value)
        for name in struct.__struct_fields__
        if (value := getattr(struct, name)) is not msgspec.UNSET
    }


def decode_pulls_page(text: str) -> Any:
    """A page of open pull requests as `decode_json` gives it, except that each node of
    `pullRequests.nodes` stays its raw JSON text (msgspec.Raw): its digest says whether it
    is new, and only a new one is decoded (most of a warm cycle's answers are not). An answer
    of another shape is decoded whole."""
    try:
        return _present(_PULLS_ANSWER.decode(text))
    except msgspec.DecodeError:  # not JSON (raised as any answer), or of another shape
        return decode_json(text)


def node_digest(node: Any) -> bytes | None:
    """A digest of one GraphQL node, equal for equal nodes (None: not an object): of its raw
    JSON text when it was left raw, else of its decoded form."""
    if isinstance(node, msgspec.Raw):
        return b"r" + hashlib.blake2b(node, digest_size=20).digest()
    if not isinstance(node, dict):
        return None
    try:
        raw = orjson.dumps(node, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON's own types (it always is, decoded from an answer)
        return None
    return hashlib.blake2b(raw, digest_size=20).digest()
