"""One process of the AWS fleet test: aiobotocore calls through the installed handler until told to stop.

Run by :func:`conftest_redis.run_fleet` with a JSON config as its argument: ``redis`` (URL), ``prefix``,
``endpoint`` (the throttling fake DynamoDB), ``tasks``, ``duration``, optional ``way``. Its aiobotocore client has
asyncretry installed with a retrier in adaptive mode whose limiter (``RedisAdaptiveRateLimiter``) and retry quota
(``RedisRetryQuota``) are shared by the whole fleet through Redis; with ``"way": "sdk"``
(``benchmarks/bench_aws.py``'s comparison) it keeps the SDK's own adaptive mode, a limiter per process. It connects,
makes one call (the warm-up: Redis scripts loaded, the client's endpoint rules read), prints ``ready``, waits for a
line on stdin (the barrier), then runs ``tasks`` closed-loop tasks for ``duration`` seconds and prints
``{"successes": n, "failures": n, "attempts": n, "enabled": bool, "fill_rate": float}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session

from asyncretry import Retrier, RetryPolicy
from asyncretry.aws import install
from asyncretry.redis import RedisAdaptiveRateLimiter, RedisBackend, RedisRetryQuota

KEY = {"TableName": "items", "Key": {"id": {"S": "1"}}}


async def main(config: dict[str, Any]) -> dict[str, Any]:
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_EC2_METADATA_DISABLED="true",
                      AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    async with RedisBackend(config["redis"], prefix=config["prefix"], operation_timeout=2.0) as backend:
        limiter = RedisAdaptiveRateLimiter(backend, name="table")
        quota = RedisRetryQuota(backend, name="table")
        retrier = Retrier(RetryPolicy(mode="adaptive"), limiter=limiter, quota=quota, name="fleet")
        client_config = AioConfig(retries={"mode": "adaptive"}, max_pool_connections=config["tasks"])
        async with get_session().create_client("dynamodb", region_name="us-east-1", endpoint_url=config["endpoint"],
                                               config=client_config) as client:
            if config.get("way", "asyncretry") == "asyncretry":
                install(client, retrier, scope="table")
            await client.get_item(**KEY)
            print("ready", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            stop = time.monotonic() + config["duration"]
            out: dict[str, Any] = {"successes": 0, "failures": 0, "sdk_attempts": 0}

            async def worker() -> None:
                while time.monotonic() < stop:
                    try:
                        response = await client.get_item(**KEY)
                    except Exception:  # the call failed after its retries: counted, then go on
                        out["failures"] += 1
                    else:
                        out["successes"] += 1
                        out["sdk_attempts"] += response["ResponseMetadata"]["RetryAttempts"] + 1

            await asyncio.gather(*(worker() for _ in range(config["tasks"])))
        stats = limiter.statistics()
        out.update(attempts=retrier.statistics().attempts, enabled=stats.enabled, fill_rate=stats.fill_rate)
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
