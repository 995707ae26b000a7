"""grpc.aio runs on asyncio only: under trio the interceptors refuse to be made, with a clear error."""

from __future__ import annotations

import pytest

from asyncretry.grpc import RetryInterceptors, insecure_channel

pytestmark = [pytest.mark.anyio]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_trio_is_refused_with_a_clear_error() -> None:
    """grpc.aio has no trio support: making the interceptors or a channel under trio says so."""
    with pytest.raises(RuntimeError, match="asyncio only"):
        RetryInterceptors()
    with pytest.raises(RuntimeError, match="asyncio only"):
        insecure_channel("127.0.0.1:1", retry=None)
