"""The protocols integrators implement: shared state kept on a server (a quota, a breaker ...) for the engine.

A :class:`~asyncretry.Retrier` takes either the in-process primitives (``RetryQuota``,
``CircuitBreaker`` ...) or objects following these protocols, whose answers it awaits
(``asyncretry.redis`` implements them on Redis)::

    from asyncretry.protocols import RemoteQuota

Whatever the server, a backend that cannot reach it either fails closed with
:class:`~asyncretry.BackendUnavailable` or falls back to local state, and announces each outage with the
:class:`~asyncretry.BackendLost` and :class:`~asyncretry.BackendRecovered` events: these names belong to
every backend, not to Redis alone, so they are importable from ``asyncretry`` itself.
"""

from __future__ import annotations

from ._primitives._shared import RemoteBreaker as RemoteBreaker
from ._primitives._shared import RemoteBucket as RemoteBucket
from ._primitives._shared import RemoteBudget as RemoteBudget
from ._primitives._shared import RemoteLimiter as RemoteLimiter
from ._primitives._shared import RemoteQuota as RemoteQuota

__all__ = ["RemoteBreaker", "RemoteBucket", "RemoteBudget", "RemoteLimiter", "RemoteQuota"]
