"""Retry budget vs the AWS retry quota vs tenacity, in virtual time.

Two scenarios, 1,000 calls/s, every call allowed three attempts with the same jittered exponential
backoff (50 ms base, 2x, capped at 1 s):

* **outage**: every attempt fails for ``--seconds`` (60): attempts the server receives during the outage
  per call made during it. The budget's promise: at most ``1 + ratio + min_retries_per_second / 1000``
  (1.11 at ratio 0.1, floor 10/s, window 10 s).
* **brown-out**: 10% of attempts fail at random: goodput (calls that succeed) against tenacity's,
  which retries without any limit. The budget's promise: within 1%.

The rows:

* ``tenacity``: ``AsyncRetrying(stop_after_attempt(3), wait_random_exponential(0.05, max=1))``.
* ``aws quota``: asyncretry's ``Retrier(RetryPolicy())`` (standard mode: the 500-token retry quota).
* ``budget``: asyncretry's ``Retrier(RetryPolicy(quota=False, budget=RetryBudgetConfig(ratio=0.1,
  min_retries_per_second=10, window=10)))``: the retry budget instead of the quota.
* ``quota + budget``: both (a retry goes ahead only when both allow it).

Everything runs on asyncretry's virtual-time event loop: the 60 s take a few seconds of real time.
``python -m benchmarks.bench_budget [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import tenacity

from asyncretry import (
    ExponentialBackoff,
    Retrier,
    RetryBudgetConfig,
    RetryPolicy,
)
from asyncretry.testing import virtual_time_loop

RATE = 1000
ATTEMPTS = 3
BUDGET = RetryBudgetConfig(ratio=0.1, min_retries_per_second=10, window=10)
BACKOFF = ExponentialBackoff(initial=0.05, max_delay=1.0)


class Unavailable(ConnectionError):
    """The server's error: a connection error, which every row retries."""


@dataclass
class Server:
    """Fails attempts during the outage (``down_until``) or with probability ``failure_rate``; counts them."""

    down_until: float
    failure_rate: float
    rng: random.Random
    attempts: int = 0
    attempts_while_down: int = 0

    async def handle(self) -> str:
        loop = asyncio.get_running_loop()
        self.attempts += 1
        if loop.time() < self.down_until:
            self.attempts_while_down += 1
            raise Unavailable("503")
        if self.failure_rate and self.rng.random() < self.failure_rate:
            raise Unavailable("503")
        return "ok"


Client = Callable[[Server], Awaitable[str]]


def tenacity_client() -> Client:
    retrying = tenacity.AsyncRetrying(
        stop=tenacity.stop_after_attempt(ATTEMPTS),
        wait=tenacity.wait_random_exponential(multiplier=0.05, max=1.0),
        reraise=True,
    )

    async def call(server: Server) -> str:
        return await retrying(server.handle)

    return call


def quota_client() -> Client:
    retrier = Retrier(RetryPolicy(max_attempts=ATTEMPTS, backoff=BACKOFF), name="bench")

    async def call(server: Server) -> str:
        return await retrier.call(server.handle)

    return call


def budget_client() -> Client:
    retrier = Retrier(RetryPolicy(max_attempts=ATTEMPTS, backoff=BACKOFF, quota=False, budget=BUDGET), name="bench")

    async def call(server: Server) -> str:
        return await retrier.call(server.handle)

    return call


def quota_and_budget_client() -> Client:
    retrier = Retrier(RetryPolicy(max_attempts=ATTEMPTS, backoff=BACKOFF, budget=BUDGET), name="bench")

    async def call(server: Server) -> str:
        return await retrier.call(server.handle)

    return call


async def run(client: Client, server: Server, seconds: float) -> tuple[int, int]:
    """Calls at RATE/s for ``seconds``; returns (calls, successes)."""
    outcomes: list[bool] = []

    async def one() -> None:
        try:
            await client(server)
        except Exception:
            outcomes.append(False)
        else:
            outcomes.append(True)

    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks = []
    for index in range(int(seconds * RATE)):
        delay = start + index / RATE - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    return len(tasks), sum(outcomes)


def scenario(make: Callable[[], Client], *, seconds: float, outage: bool) -> tuple[float, float]:
    """(attempts per call while the server was down, goodput) for one client in one scenario."""

    async def main() -> tuple[float, float]:
        server = Server(down_until=seconds if outage else -1.0, failure_rate=0.0 if outage else 0.1,
                        rng=random.Random(18))
        calls, successes = await run(make(), server, seconds)
        return (server.attempts_while_down if outage else server.attempts) / calls, successes / calls

    loop = virtual_time_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 20 s scenario instead of 60 s")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    seconds = 20.0 if args.quick else args.seconds
    clients = {
        "tenacity": tenacity_client, "aws quota": quota_client, "budget": budget_client,
        "quota + budget": quota_and_budget_client,
    }
    bound = 1 + BUDGET.ratio + BUDGET.min_retries_per_second / RATE
    print(f"{RATE} calls/s for {seconds:g} s, {ATTEMPTS} attempts, {BUDGET}")
    print(f"{'client':<14} {'outage attempts/call':>21} {'x tenacity':>10} {'brown-out goodput':>18} "
          f"{'vs tenacity':>12} {'real s':>7}")
    rows: dict[str, tuple[float, float]] = {}
    for name, make in clients.items():
        started = time.perf_counter()
        load, _ = scenario(make, seconds=seconds, outage=True)
        _, goodput = scenario(make, seconds=seconds, outage=False)
        rows[name] = (load, goodput)
        base_load, base_goodput = rows["tenacity"]
        print(f"{name:<14} {load:>21.4f} {load / base_load:>10.3f} {goodput:>18.5f} "
              f"{goodput / base_goodput - 1:>+12.3%} {time.perf_counter() - started:>7.1f}")
    load, goodput = rows["budget"]
    base_goodput = rows["tenacity"][1]
    print(f"targets: budget outage {load:.4f} <= {bound:.4f}: {'met' if load <= bound else 'MISSED'}; "
          f"brown-out goodput within 1% of tenacity's: {'met' if goodput >= 0.99 * base_goodput else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
