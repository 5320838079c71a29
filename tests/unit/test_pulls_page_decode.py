"""A page of pull requests is decoded with each node left raw (issue 19): a node is decoded only
when its digest is new; an answer of any other shape is decoded as every answer is."""

from __future__ import annotations

import msgspec
import orjson
import pytest

from bot.github.nodes import decode_pulls_page, node_digest
from bot.github.transport import decode_json

PAGE = (
    '{"data":{"repository":{"pullRequests":{"totalCount":2,'
    '"pageInfo":{"hasNextPage":false,"endCursor":"Y3"},'
    '"nodes":[{"number":1,"headRefOid":"a"},{"number":2,"headRefOid":"b"}]}},'
    '"rateLimit":{"cost":1,"remaining":4999}}}'
)


def test_the_nodes_stay_raw_and_everything_else_is_as_decoded() -> None:
    page = decode_pulls_page(PAGE)
    nodes = page["data"]["repository"]["pullRequests"].pop("nodes")
    assert all(isinstance(node, msgspec.Raw) for node in nodes)
    assert [orjson.loads(bytes(n)) for n in nodes] == orjson.loads(PAGE)["data"]["repository"][
        "pullRequests"
    ]["nodes"]
    whole = decode_json(PAGE)
    del whole["data"]["repository"]["pullRequests"]["nodes"]
    assert page == whole


def test_equal_raw_nodes_have_equal_digests_and_different_ones_do_not() -> None:
    first = decode_pulls_page(PAGE)["data"]["repository"]["pullRequests"]["nodes"]
    again = decode_pulls_page(PAGE)["data"]["repository"]["pullRequests"]["nodes"]
    changed = decode_pulls_page(PAGE.replace('"b"', '"c"'))["data"]["repository"]
    assert [node_digest(n) for n in first] == [node_digest(n) for n in again]
    other = changed["pullRequests"]["nodes"]
    assert node_digest(first[0]) == node_digest(other[0])
    assert node_digest(first[1]) != node_digest(other[1])


@pytest.mark.parametrize(
    "text",
    [
        '{"data":{"repository":null},"errors":[{"type":"NOT_FOUND","message":"x"}]}',
        '{"data":{"repository":{"pullRequests":{"nodes":"not a list"}}}}',
        '{"data":{"repository":"odd"}}',
        '{"data":null}',
        "[1, 2]",
        "",
        "Service unavailable",
    ],
)
def test_an_answer_of_another_shape_is_decoded_as_any_answer_is(text: str) -> None:
    assert decode_pulls_page(text) == decode_json(text)


def test_a_cut_answer_raises_as_any_answer_does() -> None:
    with pytest.raises(ValueError):
        decode_pulls_page(PAGE[:-5])
    with pytest.raises(ValueError):
        decode_json(PAGE[:-5])
