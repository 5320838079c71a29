"""A replica stopped in the middle of a state transaction (SIGSTOP, a frozen VM, a debugger)
holds its row locks; the other replicas must not wait on it forever. The server ends a
transaction left idle past the bot's bound (`IDLE_IN_TRANSACTION_S`), so the others' claims go
on, and the stopped replica's write fails when it resumes, never lands late.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import update

from bot.state import schema as t
from bot.state.db import IDLE_IN_TRANSACTION_S
from bot.state.leases import Leases
from bot.state.store import Store, StoreError

REPOS = ["octo/one", "octo/two"]


def test_a_replica_stopped_inside_a_transaction_blocks_the_others_only_for_the_bound(
    postgres_url: str,
) -> None:
    with Store.open(postgres_url) as first, Store.open(postgres_url) as second:
        stopped = Leases(first, lease_seconds=2, holder="replica-stopped")
        assert stopped.claim(REPOS)  # it holds both repositories' leases, for 2 s
        resume, failed, idle_since = threading.Event(), [], []

        def stopped_mid_write() -> None:
            try:
                with first.writing() as conn:
                    conn.execute(update(t.leases).values(holder="replica-stopped"))  # row locks
                    idle_since.append(time.monotonic())
                    resume.wait(60)  # "SIGSTOP": nothing more is sent, the transaction stays open
                    conn.execute(update(t.leases).values(holder="replica-stopped"))
            except StoreError as exc:
                failed.append(str(exc))

        thread = threading.Thread(target=stopped_mid_write, daemon=True)
        thread.start()
        time.sleep(2.5)  # the row locks are taken, and the leases expired
        other = Leases(second, lease_seconds=2, holder="replica-live")
        done: list[dict[str, int]] = []
        claimer = threading.Thread(target=lambda: done.append(other.claim(REPOS)), daemon=True)
        started = time.monotonic()
        claimer.start()
        claimer.join(IDLE_IN_TRANSACTION_S + 30)
        waited = time.monotonic() - started
        blocked = time.monotonic() - idle_since[0]
        resume.set()
        thread.join(30)
        assert done and done[0], f"the live claim still waits after {waited:.0f} s"
        assert failed, "the stopped replica's transaction went on after the server ended it"
        assert blocked >= IDLE_IN_TRANSACTION_S - 1  # it did wait on the locks, then went on


@pytest.mark.parametrize("read_only", [False, True])
def test_every_state_session_carries_the_bound(postgres_url: str, read_only: bool) -> None:
    from sqlalchemy import text

    from bot.state.db import pg_engine

    engine = pg_engine(postgres_url, read_only=read_only)
    try:
        with engine.connect() as conn:
            shown = conn.execute(text("SHOW idle_in_transaction_session_timeout")).scalar()
    finally:
        engine.dispose()
    assert shown == f"{IDLE_IN_TRANSACTION_S}s"
