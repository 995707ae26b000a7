"""The policy a botocore/aiobotocore client's calls get: its ``retries`` config, its service and the profile.

botocore resolves a client's retry settings once, when the client is made: ``Config(retries=...)`` in code,
else ``AWS_RETRY_MODE`` / ``AWS_MAX_ATTEMPTS``, else the shared config file (``retry_mode``,
``max_attempts``), and stores the result in ``client.meta.config.retries`` as ``mode`` and
``total_max_attempts`` (``max_attempts`` in code means *retries* and is turned into
``total_max_attempts = max_attempts + 1``). :func:`policy_for` reads that result, so the SDK's own
precedence applies unchanged, and adds what the SDK knows of the service:

* the errors its model marks retryable (:func:`asyncretry.botocore_classifier`);
* the 2026 rules' per-service defaults (DynamoDB and DynamoDB Streams: 4 attempts, a 25 ms transient base);
* its long-polling operations (SQS ``ReceiveMessage``, Step Functions ``GetActivityTask``, SWF
  ``PollForActivityTask`` / ``PollForDecisionTask``), under the 2026 rules.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

from asyncretry import ExponentialBackoff, RetryPolicy, botocore_classifier
from asyncretry._validate import check_choice

__all__ = [
    "LONG_POLLING_OPERATIONS",
    "SERVICE_DEFAULTS_2026",
    "client_service",
    "policy_for",
    "sdk_profile",
]

Profile = Literal["2020", "2026"]

LONG_POLLING_OPERATIONS: dict[str, frozenset[str]] = {
    "sqs": frozenset({"ReceiveMessage"}),
    "sfn": frozenset({"GetActivityTask"}),
    "swf": frozenset({"PollForActivityTask", "PollForDecisionTask"}),
}
"""The long-polling operations of each service (by its hyphenized service id), as botocore lists them."""

_DYNAMODB_2026: dict[str, Any] = {
    "max_attempts": 4,
    "backoff": ExponentialBackoff(initial=0.025, multiplier=2.0, max_delay=20.0, jitter="full"),
}
SERVICE_DEFAULTS_2026: dict[str, dict[str, Any]] = {"dynamodb": _DYNAMODB_2026, "dynamodb-streams": _DYNAMODB_2026}
"""The 2026 rules' per-service defaults (:class:`RetryPolicy` fields), by hyphenized service id."""

_MODES = ("standard", "adaptive", "legacy")


def client_service(client: Any) -> str:
    """The hyphenized service id of a botocore/boto3/aiobotocore client (``"dynamodb"``, ``"sqs"`` ...)."""
    meta = getattr(client, "meta", None)
    model = getattr(meta, "service_model", None)
    if model is None or not hasattr(meta, "events"):
        raise TypeError(f"client must be a botocore, boto3 or aiobotocore client, got {client!r}")
    return str(model.service_id.hyphenize())


def sdk_profile() -> Profile:
    """The profile the installed botocore follows: ``"2026"`` when its 2026 rules are switched on
    (``AWS_NEW_RETRIES_2026``), else ``"2020"``."""
    provider = sys.modules.get("botocore.configprovider")
    return "2026" if getattr(provider, "NEW_RETRIES_ENABLED", False) else "2020"


def policy_for(client: Any, *, profile: Profile | None = None, **changes: Any) -> RetryPolicy:
    """The :class:`RetryPolicy` that retries ``client``'s calls as its SDK would.

    The mode and the attempts are the client's resolved ``retries`` config (code, then
    ``AWS_RETRY_MODE`` / ``AWS_MAX_ATTEMPTS``, then the config file, as botocore resolves them):
    ``standard`` is :meth:`RetryPolicy.aws_standard`, ``adaptive`` :meth:`RetryPolicy.aws_adaptive`
    (the SDKs' exact limiter) and ``legacy`` :meth:`RetryPolicy.aws_legacy`. With no attempts set
    anywhere, the default is the service's (3; DynamoDB 4 under the 2026 rules; 5 in legacy mode).

    Args:
        client: a botocore, boto3 or aiobotocore client.
        profile: ``"2020"`` or ``"2026"``; default: the installed botocore's (:func:`sdk_profile`).
        **changes: other :class:`RetryPolicy` fields, which win over the derived ones
            (``limiter=AdaptiveLimiterConfig()`` for asyncretry's own limiter profile, ``breaker=``,
            ``budget=`` ...).

    Raises:
        TypeError: ``client`` is not a botocore client.
        ValueError: ``profile`` or the client's retry mode is not one of the known values.
    """
    service = client_service(client)
    if profile is None:
        profile = sdk_profile()
    else:
        check_choice("profile", profile, ("2020", "2026"))
    retries = getattr(client.meta.config, "retries", None) or {}
    mode = retries.get("mode") or "legacy"
    if mode not in _MODES:
        raise ValueError(f"the client's retries mode must be one of {', '.join(_MODES)}, got {mode!r}")
    derived: dict[str, Any] = {"classifier": botocore_classifier(client)}
    if mode != "legacy" and profile == "2026":
        derived.update(SERVICE_DEFAULTS_2026.get(service, {}))
    total = retries.get("total_max_attempts")
    if total is not None:
        derived["max_attempts"] = total
    derived.update(changes)
    if mode == "standard":
        return RetryPolicy.aws_standard(profile, **derived)
    if mode == "adaptive":
        return RetryPolicy.aws_adaptive(profile, **derived)
    return RetryPolicy.aws_legacy(**derived)
