"""A throwaway PostgreSQL cluster from Debian's ``postgresql`` package, on a free loopback port.

PostgreSQL refuses to run as root, so as root the cluster belongs to the ``postgres`` system user
(created by the package). Tests that need it skip with the reason when the binaries are missing;
scripts/test.sh installs them when it runs as root, so CI never skips.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from deeptutor_jupyter.testing.ports import free_port


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Postgres:
    def __init__(self) -> None:
        bindir = _bin_dir()
        if bindir is None:
            pytest.skip(
                "PostgreSQL is not installed (Debian package 'postgresql'); scripts/test.sh "
                "installs it when run as root"
            )
        self.bindir = bindir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="deeptutor-pg-"))
        self.data = self.dir / "data"
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.dir / "log"),
            "-w",
            "start",
        )
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
        self._wait()

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise AssertionError(f"{tool} failed: {done.stdout}\n{done.stderr}")

    def _wait(self) -> None:
        import sqlalchemy as sa

        engine = sa.create_engine(self.url)
        deadline = time.monotonic() + 30
        try:
            while True:
                try:
                    with engine.connect() as conn:
                        conn.execute(sa.text("select 1"))
                    return
                except sa.exc.OperationalError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            engine.dispose()

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
