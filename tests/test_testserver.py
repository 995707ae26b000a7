"""The fault-injecting test server's decisions, in memory (httpx.ASGITransport) on an injected clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import httpx
import pytest

from asyncretry._testserver import FaultyApp, ServerConfig

pytestmark = pytest.mark.anyio


class Clock:
    """A hand-driven clock for the app (it reads time through a plain callable)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def client_for(app: FaultyApp) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fault.test")


async def statuses(client: httpx.AsyncClient, n: int, **kwargs: Any) -> list[int]:
    return [(await client.get("/x", **kwargs)).status_code for _ in range(n)]


async def test_ok_answers_describe_the_request() -> None:
    """An "ok" answer is a 200 JSON naming the request id, its arrival number, the method and the path."""
    app = FaultyApp(ServerConfig(body_size=200))
    async with client_for(app) as client:
        first = await client.post("/orders/7", content=b"abc", headers={"x-request-id": "r1"})
        second = await client.post("/orders/7", content=b"abc", headers={"x-request-id": "r1"})
    assert first.json() == {"id": "r1", "arrival": 1, "method": "POST", "path": "/orders/7"}
    assert second.json()["arrival"] == 2
    assert len(first.content) == 200
    assert [r.body for r in app.received()] == [b"abc", b"abc"]
    assert app.repeated("POST") == {"r1": 2}
    assert app.repeated("GET") == {}


async def test_the_capacity_admits_that_many_requests_per_second() -> None:
    """capacity=10/s with a burst of 2: two at once, then 429 with Retry-After until 0.1 s has passed."""
    clock = Clock()
    app = FaultyApp(ServerConfig(capacity=10.0, capacity_burst=2.0, retry_after=timedelta(seconds=1.5)), clock=clock)
    async with client_for(app) as client:
        assert await statuses(client, 3) == [200, 200, 429]
        throttled = await client.get("/x")
        assert throttled.headers["retry-after"] == "2"  # whole seconds, rounded up
        assert throttled.json()["code"] == "TooManyRequestsException"
        clock.now += 0.15  # one more token (0.1 s at 10/s), not two
        assert await statuses(client, 2) == [200, 429]
    stats = app.statistics()
    assert (stats.requests, stats.ok, stats.throttled) == (6, 3, 3)


async def test_the_quota_admits_that_many_requests_per_window_and_announces_what_is_left() -> None:
    """quota=(3, 10 s): three answers per window, each announcing the requests left and the reset (and the
    IETF style the window too); then 429."""
    clock = Clock()
    app = FaultyApp(ServerConfig(quota=(3, 10.0), retry_after=None), clock=clock)
    async with client_for(app) as client:
        clock.now += 2.5
        answers = [await client.get("/x") for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        assert [a.headers["ratelimit"] for a in answers] == ['"window";r=2;t=8', '"window";r=1;t=8',
                                                            '"window";r=0;t=8', '"window";r=0;t=8']
        assert {a.headers["ratelimit-policy"] for a in answers} == {'"window";q=3;w=10'}
        clock.now += 7.5  # the next window
        assert await statuses(client, 4) == [200, 200, 200, 429]
    app.configure(quota_headers="x-ratelimit")
    async with client_for(app) as client:
        clock.now += 10.25
        answer = await client.get("/x")
        assert (answer.headers["x-ratelimit-remaining"], answer.headers["x-ratelimit-reset-after"]) == ("2", "9.750")
    assert app.statistics().throttled == 2


async def test_the_capacity_follows_its_schedule() -> None:
    """capacity_schedule changes the limit over time; None lifts it."""
    clock = Clock()
    config = ServerConfig(capacity=1.0, capacity_burst=1.0, capacity_schedule=((5.0, None),), retry_after=None)
    app = FaultyApp(config, clock=clock)
    async with client_for(app) as client:
        assert await statuses(client, 2) == [200, 429]
        assert "retry-after" not in (await client.get("/x")).headers
        clock.now += 5.0
        assert await statuses(client, 5) == [200] * 5


async def test_bursts_answer_503_inside_their_window() -> None:
    """Inside a burst window every request gets burst_status; before and after, the other rules apply."""
    clock = Clock()
    app = FaultyApp(ServerConfig(bursts=((1.0, 2.0),)), clock=clock)
    async with client_for(app) as client:
        assert await statuses(client, 1) == [200]
        clock.now += 1.5
        assert await statuses(client, 2) == [503, 503]
        clock.now += 2.0
        assert await statuses(client, 1) == [200]
    assert app.statistics().errors == 2


async def test_scripts_play_in_order() -> None:
    """The server's script covers the first requests; a request's own x-faults covers its own arrivals."""
    app = FaultyApp(ServerConfig(script=("503", "429")))
    async with client_for(app) as client:
        assert await statuses(client, 3) == [503, 429, 200]
        own = {"x-request-id": "a", "x-faults": "500, 404 ,ok"}
        assert await statuses(client, 4, headers=own) == [500, 404, 200, 200]
    assert [r.fault for r in app.received()] == ["503", "429", "ok", "500", "404", "ok", "ok"]


async def test_random_faults_repeat_with_the_seed() -> None:
    """The same seed gives the same sequence of random faults; the rates set their frequency."""
    async def run(seed: int) -> list[int]:
        app = FaultyApp(ServerConfig(error_rate=0.3, seed=seed))
        async with client_for(app) as client:
            return await statuses(client, 200)

    first, again, other = await run(1), await run(1), await run(2)
    assert first == again
    assert first != other
    assert 30 <= first.count(503) <= 90


async def test_slow_answers_wait() -> None:
    """A slow answer comes after slow_delay plus the latency (virtual time here)."""
    app = FaultyApp(ServerConfig(script=("slow",), slow_delay=2.0, latency=0.5))
    async with client_for(app) as client:
        start = anyio.current_time()
        assert (await client.get("/x")).status_code == 200
        assert anyio.current_time() - start == pytest.approx(2.5)
        start = anyio.current_time()
        await client.get("/x")
        assert anyio.current_time() - start == pytest.approx(0.5)


async def test_connection_faults_need_uvicorn() -> None:
    """Resets, closes and truncations act on the TCP connection, which only uvicorn exposes."""
    app = FaultyApp(ServerConfig(script=("reset",)))
    async with client_for(app) as client:
        with pytest.raises(RuntimeError, match="uvicorn"):
            await client.get("/x")


async def test_configure_and_reset() -> None:
    """configure() changes the rules while counting goes on; reset() forgets requests and restarts the clock."""
    clock = Clock()
    app = FaultyApp(clock=clock)
    async with client_for(app) as client:
        await client.get("/x")
        app.configure(script=("503", "503"))
        assert await statuses(client, 2) == [503, 200]  # the script counts from the first request ever
        app.reset()
        assert app.statistics().requests == 0
        assert await statuses(client, 3) == [503, 503, 200]
        app.configure(ServerConfig())
        assert await statuses(client, 1) == [200]
    assert "FaultyApp" in repr(app)
    assert app.config == ServerConfig()


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"capacity": 0.0}, "capacity"),
        ({"capacity_burst": 0.5}, "capacity_burst"),
        ({"capacity_schedule": ((1.0, 5.0), (1.0, 6.0))}, "capacity_schedule"),
        ({"throttle_status": 200}, "throttle_status"),
        ({"burst_status": 600}, "burst_status"),
        ({"retry_after": -1.0}, "retry_after"),
        ({"bursts": ((0.0, -1.0),)}, "bursts"),
        ({"script": ("boom",)}, "script"),
        ({"script": ("700",)}, "script"),
        ({"error_rate": 2.0}, "error_rate"),
        ({"slow_delay": -0.1}, "slow_delay"),
        ({"body_size": -1}, "body_size"),
        ({"quota": (0, 1.0)}, r"quota\[0\]"),
        ({"quota": (5, 0.0)}, r"quota\[1\]"),
        ({"quota_headers": "github"}, "quota_headers"),
    ],
)
async def test_bad_settings_are_refused_naming_the_field(changes: dict[str, Any], match: str) -> None:
    """Every bad setting is a ValueError that names the field."""
    with pytest.raises(ValueError, match=match):
        ServerConfig(**changes)


async def test_a_script_given_as_one_string_is_refused() -> None:
    """script must be a sequence of faults: a bare string is a TypeError, not 6 one-letter faults."""
    with pytest.raises(TypeError, match="script"):
        ServerConfig(script="503,ok")  # type: ignore[arg-type]
