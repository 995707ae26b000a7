"""asyncretry as a botocore/aiobotocore client's retry handler: :func:`install`.

botocore drives the attempt loop itself (``Endpoint._send_request``) and asks the ``needs-retry``
event after every attempt whether to go again, sleeping what the handler returns. The handler here
plugs asyncretry's engine into that loop through two events of the client's own emitter, one call
of the engine per SDK call (:meth:`Retrier.attempts`, kept in the call's request context):

- ``request-created`` (before each attempt is signed): the engine's ``start`` waits for what the
  attempt needs (the backoff, the adaptive limiter's token, a rate limit, the breaker's admission) and
  begins it. aiobotocore awaits async handlers, so every wait is an anyio sleep: the event loop runs on.
- ``needs-retry`` (after each attempt): the attempt's outcome (:mod:`._judge`) ends the attempt; the
  engine decides (quota, budget, limiter and breaker updated), and the handler returns ``0`` to retry
  (the engine sleeps the backoff at the next ``start``) or ``None`` to let the SDK return or raise.

The SDK's own retry handler (and adaptive mode's limiter) is unregistered, so exactly one layer retries.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Literal

from asyncretry import Attempt, Attempts, OutcomeKind, Retrier, RetryPolicy, SyncAttempts
from asyncretry._validate import check_choice, check_instance, check_str

from ._config import LONG_POLLING_OPERATIONS, client_service, policy_for
from ._judge import CRC32_HEADER, crc32_mismatch, keep_history, response_error

__all__ = ["AsyncClientRetryHandler", "ClientRetryHandler", "install", "install_session"]

Profile = Literal["2020", "2026"]
_CONTEXT_KEY = "asyncretry"  # the per-call state, in botocore's request context (one dict per call)
_SDK_RETRY_MODULES = ("botocore.retries", "aiobotocore.retries", "botocore.retryhandler", "aiobotocore.retryhandler")


class _Call:
    """The engine's call of one SDK call, and its attempt under way."""

    __slots__ = ("attempt", "attempts")

    def __init__(self, attempts: Attempts | SyncAttempts) -> None:
        self.attempts = attempts
        self.attempt: Attempt | None = None

    def __del__(self) -> None:
        # An async SDK call cancelled while an attempt was on the wire never reaches needs-retry (botocore
        # catches Exception only): when its request context goes, the attempt is abandoned as the engine
        # abandons a cancelled one (nothing recorded, a half-open probe's slot freed). The sync driver's
        # abandon takes a lock that a collection could interrupt, so a sync call is left alone.
        if self.attempt is not None and isinstance(self.attempts, Attempts):
            self.attempt = None
            self.attempts.abandon()


class _Handler:
    """What the async and the sync handler share: the policy of each operation, the scope, the retrier."""

    _async = True

    def __init__(
        self, client: Any, retrier: Retrier | None, policy: RetryPolicy | None, profile: Profile | None,
        scope: str | None,
    ) -> None:
        self.service = client_service(client)
        self._model_name = str(client.meta.service_model.service_name)
        _check_settings(retrier, policy, profile, scope, is_async=self._async)
        self.policy = policy_for(client, profile=profile) if policy is None else policy
        _check_policy(self.policy, is_async=self._async)
        self.retrier = retrier if retrier is not None else Retrier(self.policy, name=f"aws:{self.service}")
        self.scope = scope if scope is not None else str(client.meta.endpoint_url)
        self._policies: dict[str, RetryPolicy] = {}
        self._long_polling = LONG_POLLING_OPERATIONS.get(self.service, frozenset())

    def policy_of(self, operation_name: str) -> RetryPolicy:
        """The policy of one operation: the client's, with the long-polling rule for SQS ``ReceiveMessage``
        and the like under the 2026 rules (as botocore applies it)."""
        policy = self._policies.get(operation_name)
        if policy is None:
            policy = self.policy
            if (operation_name in self._long_polling and policy.profile == "2026"
                    and policy.quota_config is not None and not policy.long_polling):
                policy = policy.replace(long_polling=True)
            self._policies[operation_name] = policy
        return policy

    def _label(self, operation_name: str) -> Any:
        return lambda: f"{self.service} {operation_name}"

    def _started(self, call: _Call, attempt: Attempt | None, operation_name: str) -> None:
        if attempt is None:
            raise RuntimeError(f"{self.service} {operation_name}: the SDK sent an attempt after the call ended")
        call.attempt = attempt

    def _ending(self, request_dict: Mapping[str, Any], response: Any, caught: Exception | None,
                operation: Any) -> tuple[_Call, Attempt, Exception | None, Any] | None:
        """The call and its attempt that just ended, the error it ended with (``None``: a response that is
        not an error) and the HTTP response whose CRC32 must be checked, if any; ``None`` for a call this
        handler did not begin (installed mid-call)."""
        call: _Call | None = request_dict["context"].get(_CONTEXT_KEY)
        if call is None or call.attempt is None:
            return None
        attempt, call.attempt = call.attempt, None
        error = caught if caught is not None else response_error(response, operation.name)
        return call, attempt, error, _crc32_to_check(self, response) if error is None else None

    @staticmethod
    def _over(call: _Call, error: Exception | None, response: Any) -> None:
        """The call is over: a give-up on a result (a corrupt body every time) raises, never hands it on; the
        history of a give-up on a service error goes where the SDK's own error for it will find it."""
        attempts = call.attempts
        if error is None and attempts.gave_up is not None:
            raise attempts.result_error()
        keep_history(response, error)

    def statistics(self) -> Any:
        """The retrier's statistics (:meth:`Retrier.statistics`)."""
        return self.retrier.statistics()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} service={self.service!r} scope={self.scope!r} retrier={self.retrier!r}>"


def _crc32_to_check(handler: _Handler, response: Any) -> Any:
    """The HTTP response whose body must match its ``x-amz-crc32``, if this one must be checked."""
    if response is None or handler._model_name != "dynamodb":
        return None
    http_response = response[0]
    if http_response.status_code >= 300 or CRC32_HEADER not in http_response.headers:
        return None
    return http_response


def _mark_crc32(attempt: Attempt, handler: _Handler, http_response: Any, body: bytes) -> None:
    if crc32_mismatch(handler._model_name, http_response.status_code, http_response.headers, body):
        attempt.retry_result(http_response, reason="crc32 mismatch", kind=OutcomeKind.TRANSIENT)


class AsyncClientRetryHandler(_Handler):
    """asyncretry as an aiobotocore client's retry handler (made by :func:`install`).

    Attributes:
        retrier: the :class:`Retrier` whose quota, limiter, breaker and budget the calls share.
        policy: the client's policy (its attempts, backoff and classification).
        scope: the retrier's scope of this client's calls (default: its endpoint URL).
        service: the client's hyphenized service id.
    """

    async def on_request_created(self, request: Any, operation_name: str, **kwargs: Any) -> None:
        """Before each attempt is signed: wait for what it needs and begin it."""
        call = request.context.get(_CONTEXT_KEY)
        if call is None:
            call = request.context[_CONTEXT_KEY] = _Call(self.retrier.attempts(
                scope=self.scope, policy=self.policy_of(operation_name), label=self._label(operation_name)))
        attempt = await call.attempts.start()
        if attempt is not None:
            await attempt.__aenter__()
        self._started(call, attempt, operation_name)

    async def on_needs_retry(
        self, response: Any, caught_exception: Exception | None, request_dict: Mapping[str, Any], operation: Any,
        **kwargs: Any,
    ) -> float | None:
        """After each attempt: judge it and let the engine decide; ``0`` to retry, ``None`` when over."""
        ending = self._ending(request_dict, response, caught_exception, operation)
        if ending is None:
            return None
        call, attempt, error, checked = ending
        if checked is not None:
            _mark_crc32(attempt, self, checked, await checked.content)
        if await attempt.__aexit__(type(error) if error is not None else None, error, None):
            return 0
        self._over(call, error, response)
        return None


class ClientRetryHandler(_Handler):
    """asyncretry as a botocore/boto3 client's retry handler (made by :func:`install`); waits block the
    calling thread, as botocore's own do. Attributes as :class:`AsyncClientRetryHandler`."""

    _async = False

    def on_request_created(self, request: Any, operation_name: str, **kwargs: Any) -> None:
        """Before each attempt is signed: wait (blocking) for what it needs and begin it."""
        call = request.context.get(_CONTEXT_KEY)
        if call is None:
            call = request.context[_CONTEXT_KEY] = _Call(self.retrier.sync_attempts(
                scope=self.scope, policy=self.policy_of(operation_name), label=self._label(operation_name)))
        attempt = call.attempts.start()
        if attempt is not None:
            attempt.__enter__()
        self._started(call, attempt, operation_name)

    def on_needs_retry(
        self, response: Any, caught_exception: Exception | None, request_dict: Mapping[str, Any], operation: Any,
        **kwargs: Any,
    ) -> float | None:
        """After each attempt: judge it and let the engine decide; ``0`` to retry, ``None`` when over."""
        ending = self._ending(request_dict, response, caught_exception, operation)
        if ending is None:
            return None
        call, attempt, error, checked = ending
        if checked is not None:
            _mark_crc32(attempt, self, checked, checked.content)
        if attempt.__exit__(type(error) if error is not None else None, error, None):
            return 0
        self._over(call, error, response)
        return None


# --------------------------------------------------------------------------------------- install
_TRIO_NEEDS_HTTPX = (
    "aiobotocore's default HTTP backend (aiohttp) runs on asyncio only: on trio, make the client with "
    "AioConfig(http_session_cls=HttpxSession) (from aiobotocore.httpxsession), which runs on both"
)


def _check_policy(policy: RetryPolicy, *, is_async: bool) -> None:
    """Refuse a policy the SDK's attempt loop cannot follow (hedging, per-attempt timeouts; for
    aiobotocore, a deadline)."""
    if policy.hedging is not None:
        raise ValueError("policy.hedging must be None: the SDK sends one attempt at a time")
    if policy.attempt_timeout is not None:
        raise ValueError(
            f"policy.attempt_timeout must be None, got {policy.attempt_timeout!r}: the SDK times each "
            "attempt itself (botocore Config connect_timeout= and read_timeout=, retried as timeouts)"
        )
    if is_async and policy.deadline is not None:
        raise ValueError(
            f"policy.deadline must be None for an aiobotocore client, got {policy.deadline!r}: put the "
            "call under anyio.fail_after() or move_on_after(); the handler never sleeps past it"
        )


def _check_settings(
    retrier: object, policy: object, profile: object, scope: object, *, is_async: bool
) -> None:
    """Check :func:`install`'s and :func:`install_session`'s settings (``None``: the default) before any
    client is touched, each error naming its parameter.

    Raises:
        TypeError, ValueError: a setting of the wrong type, or a policy the SDK cannot follow.
    """
    if retrier is not None:
        check_instance("retrier", retrier, Retrier)
    if policy is not None:
        _check_policy(check_instance("policy", policy, RetryPolicy), is_async=is_async)
    if profile is not None:
        check_choice("profile", profile, ("2020", "2026"))
    if scope is not None:
        check_str("scope", scope)


def _check_backend(client: Any) -> None:
    """Refuse, with a clear error, an aiobotocore client whose HTTP backend cannot run on the running trio."""
    trio = sys.modules.get("trio")
    if trio is None:
        return
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return  # not in trio
    from aiobotocore.httpxsession import is_httpx_session_cls

    if not is_httpx_session_cls(getattr(client.meta.config, "http_session_cls", None)):
        raise RuntimeError(_TRIO_NEEDS_HTTPX)


def _is_async_client(client: Any) -> bool:
    aio = sys.modules.get("aiobotocore.client")
    return aio is not None and isinstance(client, aio.AioBaseClient)


def _registered(events: Any, event_name: str) -> list[Any]:
    """The handlers registered for ``event_name`` (and its parents) on a client's emitter.

    botocore's emitter has no public way to list them; the SDK's adaptive limiter registers without
    an id, so this is the one way to find it.
    """
    emitter = getattr(events, "_emitter", events)
    trie = getattr(emitter, "_handlers", None)
    if trie is None:
        raise RuntimeError(f"cannot list the handlers of {events!r}: an unsupported botocore version")
    return list(trie.prefix_search(event_name))


def _remove_sdk_retries(client: Any, service: str) -> None:
    """Unregister the SDK's own retry handler, quota release and adaptive limiter from ``client``."""
    events = client.meta.events
    events.unregister(f"needs-retry.{service}", unique_id=f"retry-config-{service}")
    for event_name in ("before-send", "needs-retry", f"after-call.{service}"):
        for handler in _registered(events, event_name):
            owner = getattr(handler, "__self__", None)
            if owner is not None and type(owner).__module__.startswith(_SDK_RETRY_MODULES):
                events.unregister(event_name, handler)


def _install_on_client(
    client: Any, retrier: Retrier | None, policy: RetryPolicy | None, profile: Profile | None, scope: str | None,
) -> AsyncClientRetryHandler | ClientRetryHandler:
    is_async = _is_async_client(client)
    if is_async:
        _check_backend(client)
    handler_class = AsyncClientRetryHandler if is_async else ClientRetryHandler
    handler = handler_class(client, retrier, policy, profile, scope)
    service = handler.service
    events = client.meta.events
    if any(isinstance(getattr(h, "__self__", None), _Handler) for h in _registered(events, f"needs-retry.{service}")):
        raise ValueError(f"asyncretry is already installed on {client!r}")
    _remove_sdk_retries(client, service)
    events.register_first(f"request-created.{service}", handler.on_request_created,
                          unique_id=f"asyncretry-start-{service}")
    events.register(f"needs-retry.{service}", handler.on_needs_retry, unique_id=f"retry-config-{service}")
    return handler


class _InstallingContext:
    """aiobotocore's ``create_client(...)`` context, installing the handler on the client it opens."""

    __slots__ = ("_context", "_install")

    def __init__(self, context: Any, install: Any) -> None:
        self._context = context
        self._install = install

    async def __aenter__(self) -> Any:
        client = await self._context.__aenter__()
        self._install(client)
        return client

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._context.__aexit__(*exc_info)


def _install_on_session(
    session: Any, retrier: Retrier | None, policy: RetryPolicy | None, profile: Profile | None, scope: str | None,
) -> None:
    create_client = session.create_client
    if getattr(create_client, "_asyncretry", False):
        raise ValueError(f"asyncretry is already installed on {session!r}")
    aio = sys.modules.get("aiobotocore.session")
    is_async = aio is not None and isinstance(session, aio.AioSession)
    _check_settings(retrier, policy, profile, scope, is_async=is_async)

    def install_on(client: Any) -> None:
        _install_on_client(client, retrier, policy, profile, scope)

    def installing_create_client(*args: Any, **kwargs: Any) -> Any:
        made = create_client(*args, **kwargs)
        if is_async:
            return _InstallingContext(made, install_on)
        install_on(made)
        return made

    installing_create_client._asyncretry = True  # type: ignore[attr-defined]
    session.create_client = installing_create_client


def install(
    client: Any,
    retrier: Retrier | None = None,
    *,
    policy: RetryPolicy | None = None,
    profile: Profile | None = None,
    scope: str | None = None,
) -> AsyncClientRetryHandler | ClientRetryHandler:
    """Make asyncretry the retry handler of a boto3, botocore or aiobotocore client.

    The SDK's own retry handler (and adaptive mode's limiter) is removed: exactly one layer retries.
    The calls are retried by ``retrier``'s engine with the SDK's information: error codes, HTTP
    statuses, the service model's retryable errors, ``x-amz-retry-after``, DynamoDB's CRC32 check, the
    long-polling operations and the service's defaults (:func:`policy_for`).

    Args:
        client: ``boto3.client(...)``, a botocore client or an aiobotocore client.
        retrier: the :class:`Retrier` whose quota, limiter, breaker and budget the calls use; share one
            between clients (or give it Redis-backed parts) for one quota and one limiter across them.
            Default: a new retrier per client, as the SDK keeps a quota per client.
        policy: the policy of the calls (attempts, backoff, classification ...); default: the client's
            own retry config (:func:`policy_for`), which also honours ``AWS_RETRY_MODE`` and
            ``AWS_MAX_ATTEMPTS``. A new retrier's shared parts come from it too.
        profile: ``"2020"`` or ``"2026"`` for the default policy; default: the installed botocore's.
        scope: the retrier's scope of the calls; default: the client's endpoint URL.

    Returns:
        The client's handler: its ``retrier``, ``policy`` and ``statistics()``.

    Raises:
        TypeError: ``client`` is not a botocore client (a session: :func:`install_session`), or an
            argument has the wrong type.
        ValueError: the policy has hedging or a per-attempt timeout (or, for aiobotocore, a deadline:
            use ``anyio.fail_after``), or asyncretry is already installed on ``client``.
        RuntimeError: installed under trio on an aiobotocore client whose HTTP backend is aiohttp
            (asyncio only): use aiobotocore's httpx backend there.
    """
    if not (hasattr(client, "meta") and hasattr(client.meta, "events")):
        hint = " (a session: use install_session)" if hasattr(client, "create_client") else ""
        raise TypeError(f"client must be a botocore, boto3 or aiobotocore client{hint}, got {client!r}")
    return _install_on_client(client, retrier, policy, profile, scope)


def install_session(
    session: Any,
    retrier: Retrier | None = None,
    *,
    policy: RetryPolicy | None = None,
    profile: Profile | None = None,
    scope: str | None = None,
) -> None:
    """:func:`install` on every client a botocore or aiobotocore ``Session`` makes from now on.

    boto3 users pass the botocore session of their ``boto3.session.Session(botocore_session=...)``.
    Arguments as for :func:`install`; one ``retrier`` given here is shared by all the clients (default:
    one per client).

    Raises:
        TypeError: ``session`` is not a botocore or aiobotocore session.
        ValueError: asyncretry is already installed on ``session``.
    """
    botocore_session = sys.modules.get("botocore.session")
    if botocore_session is None or not isinstance(session, botocore_session.Session):
        raise TypeError(f"session must be a botocore or aiobotocore Session, got {session!r}")
    _install_on_session(session, retrier, policy, profile, scope)
