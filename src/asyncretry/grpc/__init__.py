"""asyncretry for grpc.aio: retries, hedging, rate limits and circuit breaking as client interceptors.

    channel = asyncretry.grpc.insecure_channel("orders:50051", retry=RetryInterceptors(target="orders:50051"))

grpc.aio runs on asyncio only, so this package does too; :class:`SyncRetryInterceptors` serves the
synchronous ``grpc`` API. See :class:`RetryInterceptors` for the options,
:class:`GrpcClassifier` for the status table, and :func:`call_options` for per-call options.
"""

from __future__ import annotations

from ._classify import PUSHBACK_KEY as PUSHBACK_KEY
from ._classify import GrpcClassifier as GrpcClassifier
from ._classify import pushback_of as pushback_of
from ._interceptors import CHANNEL_OPTIONS as CHANNEL_OPTIONS
from ._interceptors import RetryInterceptors as RetryInterceptors
from ._interceptors import insecure_channel as insecure_channel
from ._interceptors import secure_channel as secure_channel
from ._options import CallOptions as CallOptions
from ._options import call_options as call_options
from ._options import current_options as current_options
from ._plan import ATTEMPTS_KEY as ATTEMPTS_KEY
from ._sync import SyncRetryInterceptors as SyncRetryInterceptors
from ._sync import intercept_channel as intercept_channel

__all__ = [
    "ATTEMPTS_KEY",
    "CHANNEL_OPTIONS",
    "PUSHBACK_KEY",
    "CallOptions",
    "GrpcClassifier",
    "RetryInterceptors",
    "SyncRetryInterceptors",
    "call_options",
    "current_options",
    "insecure_channel",
    "intercept_channel",
    "pushback_of",
    "secure_channel",
]
