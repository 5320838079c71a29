"""A PostgreSQL server of a test's own, that the test may crash and start again.

The machine's shared server (CISB_TEST_POSTGRES_URL) serves every test at once and is never
restarted by one. A test that needs the database to really go away (a broker outage) starts a
private one: `initdb` into a temporary folder, `pg_ctl start` on a free loopback port, `crash`
(`pg_ctl stop -m immediate`: every backend killed, no shutdown checkpoint, crash recovery on
the next start, as when the server's machine loses power or the process is OOM-killed) and
`start` again. As root (CI) the server runs as the `postgres` user, which initdb requires.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "cisb"


def bindir() -> Path | None:
    """The newest installed PostgreSQL's programs (Debian's layout first), or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return None if initdb is None else Path(initdb).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivatePostgres:
    """One throw-away PostgreSQL server: trust authentication on 127.0.0.1 only, no Unix
    socket, fsync off (a crash of the server, not of the machine, loses nothing committed)."""

    def __init__(self) -> None:
        """initdb into a new temporary folder (not started yet)."""
        found = bindir()
        if found is None:
            raise RuntimeError("no PostgreSQL server programs (initdb, pg_ctl) are installed")
        self.bin = found
        self.folder = Path(tempfile.mkdtemp(prefix="cisb-pg-"))
        self.data = self.folder / "data"
        self.logfile = self.folder / "server.log"
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            owner = pwd.getpwnam("postgres")
            os.chown(self.folder, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "-E", "UTF8",
                  "--no-sync", "--no-instructions")  # fmt: skip

    @property
    def url(self) -> str:
        """postgresql://cisb@127.0.0.1:PORT/postgres"""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(
            [*self._as, str(self.bin / program), *args], cwd=self.folder,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)}: {done.stdout}{done.stderr}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections (after crash recovery)."""
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
                   "-c fsync=off -c full_page_writes=off -c max_connections=200")  # fmt: skip
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-o", options,
                  "-w", "-t", "120", "start")  # fmt: skip

    def crash(self) -> None:
        """Stop the server at once (`-m immediate`): connections drop, nothing is flushed."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def log(self) -> str:
        """The server's own log."""
        return self.logfile.read_text() if self.logfile.exists() else ""

    def close(self) -> None:
        """Stop the server (if it runs) and remove its folder."""
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.crash()
        shutil.rmtree(self.folder, ignore_errors=True)
