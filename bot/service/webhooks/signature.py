"""The `X-Hub-Signature-256` check: HMAC-SHA256 of the body under one of the secrets (pure)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence


def signature(body: bytes, secret: str) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body` under `secret`."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify_signature(body: bytes, header: str | None, secrets: Sequence[str]) -> bool:
    """Whether `header` is the HMAC-SHA256 of `body` under one of `secrets` (constant time)."""
    if not header or not header.startswith("sha256="):
        return False
    given = header.encode("ascii", "replace")
    matched = False
    for secret in secrets:
        if secret:  # every secret is compared, so timing does not tell which one matched
            matched |= hmac.compare_digest(given, signature(body, secret).encode("ascii"))
    return matched
