"""asyncretry installed as the AWS SDK's retry handler, against the SDK's own handlers.

Run on demand (never part of the test suite)::

    .venv/bin/python -m benchmarks.bench_aws            # both parts
    .venv/bin/python -m benchmarks.bench_aws --quick    # fewer calls, shorter runs

1. **Success path.** DynamoDB ``GetItem`` calls that succeed at once, through a botocore client and an
   aiobotocore client whose HTTP layer is a ``before-send`` stub answering at once (no network: what is
   measured is the SDK's pipeline plus its retry handler). The same client type runs with the SDK's own
   standard-mode handler and with asyncretry installed, in interleaved rounds; the figure is the time per
   call and the ratio asyncretry / SDK.
2. **8 clients, one throttled endpoint.** Eight aiobotocore clients in one process, each with ``TASKS``
   closed-loop tasks, call a local endpoint (``tests/aws_fake.py``'s fake DynamoDB under uvicorn, in a
   subprocess) that admits ``R`` requests per second (a token bucket) and answers ``ThrottlingException`` above.
   Once with the SDK's adaptive mode (a limiter per client), once with asyncretry installed on every client
   with one shared :class:`Retrier` in adaptive mode (one limiter for the eight). Figures: goodput (successful
   calls per second, over the endpoint's rate) and the share of attempts throttled.
3. **4 processes, one throttled endpoint.** Four processes (``tests/aws_fleet_worker.py``, started together
   on a barrier) of one aiobotocore client with ``TASKS`` closed-loop tasks each, against the same kind of
   endpoint: with the SDK's adaptive mode (a limiter per process), and with asyncretry installed with a
   ``RedisAdaptiveRateLimiter`` and a ``RedisRetryQuota`` shared by the fleet (the test suite's Redis server,
   started on a free port). Same figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import time
import warnings
from binascii import crc32
from collections.abc import Callable
from typing import Any

import botocore.session
from aiobotocore.awsrequest import AioAWSResponse
from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from asyncretry import Retrier, RetryPolicy
from asyncretry.aws import install

KEY = {"TableName": "items", "Key": {"id": {"S": "1"}}}
_BODY = json.dumps({"Item": {"id": {"S": "1"}}}).encode()
_HEADERS = {"content-type": "application/x-amz-json-1.0", "content-length": str(len(_BODY)),
            "x-amz-crc32": str(crc32(_BODY) & 0xFFFFFFFF), "x-amzn-requestid": "r"}
os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_EC2_METADATA_DISABLED="true",
                  AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
URL = "http://127.0.0.1:9"  # never connected to: the stub answers before the send


class _Raw:
    def stream(self) -> list[bytes]:
        return [_BODY]

    async def read(self) -> bytes:
        return _BODY


def _sync_answer(request: Any, **kwargs: Any) -> AWSResponse:
    return AWSResponse(request.url, 200, dict(_HEADERS), _Raw())


async def _async_answer(request: Any, **kwargs: Any) -> AioAWSResponse:
    return AioAWSResponse(request.url, 200, dict(_HEADERS), _Raw())


def _per_call(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


async def _per_call_async(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - start) / calls


def success_path(calls: int, rounds: int) -> dict[str, float]:
    """Seconds per successful call (median of rounds): botocore and aiobotocore, SDK handler vs asyncretry."""
    session = botocore.session.get_session()
    config = Config(retries={"mode": "standard"})
    sdk = session.create_client("dynamodb", region_name="us-east-1", endpoint_url=URL, config=config)
    ours = session.create_client("dynamodb", region_name="us-east-1", endpoint_url=URL, config=config)
    install(ours)
    for client in (sdk, ours):
        client.meta.events.register("before-send.dynamodb", _sync_answer)
        client.get_item(**KEY)
    times: dict[str, list[float]] = {"botocore sdk": [], "botocore asyncretry": []}
    for _ in range(rounds):
        times["botocore sdk"].append(_per_call(lambda: sdk.get_item(**KEY), calls))
        times["botocore asyncretry"].append(_per_call(lambda: ours.get_item(**KEY), calls))

    async def aio() -> None:
        aio_config = AioConfig(retries={"mode": "standard"})
        aio_session = get_session()
        async with (
            aio_session.create_client("dynamodb", region_name="us-east-1", endpoint_url=URL, config=aio_config) as a,
            aio_session.create_client("dynamodb", region_name="us-east-1", endpoint_url=URL, config=aio_config) as b,
        ):
            install(b)
            for client in (a, b):
                client.meta.events.register("before-send.dynamodb", _async_answer)
                await client.get_item(**KEY)
            times["aiobotocore sdk"], times["aiobotocore asyncretry"] = [], []
            for _ in range(rounds):
                times["aiobotocore sdk"].append(await _per_call_async(lambda: a.get_item(**KEY), calls))
                times["aiobotocore asyncretry"].append(await _per_call_async(lambda: b.get_item(**KEY), calls))

    asyncio.run(aio())
    return {name: statistics.median(values) for name, values in times.items()}


# ------------------------------------------------------------------------------ 8 clients, throttled
def _start_endpoint(rate: float) -> tuple[Any, str]:
    """The fake DynamoDB in a subprocess (its own GIL), admitting ``rate`` requests per second."""
    import subprocess
    import sys

    code = (
        "import sys, time; sys.path.insert(0, 'tests')\n"
        "from aws_fake import FakeAws\n"
        "from asyncretry._testserver import FaultServer\n"
        f"app = FakeAws(rate={rate})\n"
        "with FaultServer(app) as s:\n"
        "    print(s.url, flush=True)\n"
        "    sys.stdin.readline()\n"
        "    print(app.throttled, len(app.received), flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _stop_endpoint(process: Any) -> tuple[int, int]:
    out, _ = process.communicate("stop\n", timeout=30)
    throttled, received = out.split()
    return int(throttled), int(received)


async def _fleet(url: str, way: str, clients: int, tasks: int, duration: float) -> tuple[int, int]:
    """(successes, failed calls) of ``clients`` aiobotocore clients x ``tasks`` closed loops for ``duration``."""
    session = get_session()
    config = AioConfig(retries={"mode": "adaptive"}, max_pool_connections=tasks)
    shared = Retrier(RetryPolicy(mode="adaptive"), name="fleet") if way == "asyncretry shared" else None
    successes = failures = 0
    async with contextlib.AsyncExitStack() as stack:
        made = [await stack.enter_async_context(session.create_client(
            "dynamodb", region_name="us-east-1", endpoint_url=url, config=config)) for _ in range(clients)]
        if shared is not None:
            for client in made:
                install(client, shared, policy=shared.policy, scope="table")
        end = time.perf_counter() + duration

        async def loop(client: Any) -> None:
            nonlocal successes, failures
            while time.perf_counter() < end:
                try:
                    await client.get_item(**KEY)
                    successes += 1
                except ClientError:
                    failures += 1

        await asyncio.gather(*(loop(client) for client in made for _ in range(tasks)))
    return successes, failures


def throttled_endpoint(rate: float, clients: int, tasks: int, duration: float) -> dict[str, dict[str, float]]:
    """Goodput / R and throttled share, for the SDK's per-client adaptive mode and asyncretry's shared limiter."""
    figures: dict[str, dict[str, float]] = {}
    for way in ("sdk adaptive", "asyncretry shared"):
        process, url = _start_endpoint(rate)
        successes, failures = asyncio.run(_fleet(url, way, clients, tasks, duration))
        throttled, received = _stop_endpoint(process)
        figures[way] = {"goodput/R": successes / duration / rate,
                        "throttled": throttled / received if received else 0.0, "failed": failures}
    return figures


def four_processes(rate: float, tasks: int, duration: float) -> dict[str, dict[str, float]]:
    """Goodput / R and throttled share of a 4-process fleet, SDK adaptive per process vs asyncretry via Redis."""
    import sys
    from pathlib import Path

    from .bench_redis import _server_module, start_redis_server

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    worker = Path(__file__).resolve().parent.parent / "tests" / "aws_fleet_worker.py"
    figures: dict[str, dict[str, float]] = {}
    for way in ("sdk", "asyncretry"):
        redis_server = start_redis_server()
        process, url = _start_endpoint(rate)
        try:
            config = {"redis": redis_server.url, "prefix": f"bench:{time.time_ns()}:", "endpoint": url,
                      "tasks": tasks, "duration": duration, "way": way}
            results = _server_module().run_fleet(worker, [config] * 4, timeout=duration + 90)
        finally:
            throttled, received = _stop_endpoint(process)
            redis_server.close()
        successes = sum(result["successes"] for result in results)
        figures[way] = {"goodput/R": successes / duration / rate, "throttled": throttled / received,
                        "failed": sum(result["failures"] for result in results)}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rate", default=20.0, type=float, help="requests per second the endpoint admits (default 20)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", DeprecationWarning)
    calls, rounds, duration = (200, 3, 3.0) if args.quick else (1000, 5, 8.0)
    times = success_path(calls, rounds)
    print(f"success path, {calls} calls x {rounds} rounds (median), before-send stub, no network")
    for sdk in ("botocore", "aiobotocore"):
        base, ours = times[f"{sdk} sdk"], times[f"{sdk} asyncretry"]
        print(f"  {sdk:12} SDK standard {base * 1e6:8.1f} us/call   asyncretry {ours * 1e6:8.1f} us/call"
              f"   ratio {ours / base:.3f}")
    figures = throttled_endpoint(args.rate, 8, 2, duration)
    print(f"8 aiobotocore clients x 2 tasks, one endpoint admitting {args.rate:.0f}/s, {duration:.0f} s")
    for way, row in figures.items():
        print(f"  {way:18} goodput/R {row['goodput/R']:.3f}   throttled {row['throttled']:.1%}"
              f"   failed calls {row['failed']:.0f}")
    fleet = four_processes(args.rate, 4, duration)
    print(f"4 processes x 1 aiobotocore client x 4 tasks, one endpoint admitting {args.rate:.0f}/s, {duration:.0f} s")
    names = {"sdk": "sdk adaptive", "asyncretry": "asyncretry redis"}
    for way, row in fleet.items():
        print(f"  {names[way]:18} goodput/R {row['goodput/R']:.3f}   throttled {row['throttled']:.1%}"
              f"   failed calls {row['failed']:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
