"""The Amazon SNS delivery policy: four retry phases, a choice of backoff curve, a delivery rate cap.

A :class:`DeliveryPolicy` is a :class:`~asyncretry.Backoff` whose retries run through four phases
(retry numbers count from 1, the first retry following the first failed delivery)::

    immediate     num_no_delay_retries    x 0
    pre-backoff   num_min_delay_retries   x min_delay_target
    backoff       num_retries - the rest, from min_delay_target up to max_delay_target by backoff_function
    post-backoff  num_max_delay_retries   x max_delay_target

After ``num_retries`` retries (:attr:`DeliveryPolicy.max_retries`) the policy is exhausted: SNS then moves
the message to a dead-letter queue or drops it, which the engine exposes as its give-up hook.

The backoff curves
------------------
AWS documents the four ``backoffFunction`` curves only by a chart: all start at ``minDelayTarget`` and
reach ``maxDelayTarget`` at the last backoff retry; *exponential* "increases rapidly, reaching the max delay
fastest", *linear* increases steadily, *arithmetic* and *geometric* are "steeper than linear but slower
than exponential". We read "reaching the max fastest" literally: at every retry inside the phase the
exponential delay is the highest of the four and the linear one the lowest, with arithmetic and geometric
in between (they cross each other). The curves are therefore concave: big steps first, small steps near the
max. AWS publishes no formulas, so these closed forms are ours. With ``x = i / (k - 1)`` the progress of
backoff retry ``i`` (0-based) of ``k``, the delay is ``min + (max - min) * (1 - gap(x))``, where ``gap`` is
the fraction of the way still to go:

* ``linear``:      ``gap = 1 - x``; equal steps.
* ``arithmetic``:  ``gap = (1 - x)**2``; the steps shrink by a constant amount (an arithmetic progression).
* ``geometric``:   ``gap = (R**x - R) / (1 - R)``; the steps shrink by a constant ratio (a geometric
  progression), the last step being ``R`` (1/16) times the first.
* ``exponential``: ``gap = (1 - x)**2 * R**x``; the arithmetic gap further decays exponentially, so it
  closes fastest.

All four are non-decreasing, start exactly at ``min_delay_target`` and end exactly at ``max_delay_target``,
and for ``0 < x < 1``: ``linear < arithmetic, geometric < exponential`` (because ``(1 - x)**2 < 1 - x``, a
convex gap lies below its chord, and ``y**2 <= (1 - R**y) / (1 - R)`` for ``y = 1 - x``). A backoff phase
of a single retry uses ``min_delay_target``.

Jitter
------
SNS applies jitter to its retries without saying how. With ``jitter=True`` (the default) each non-zero delay
is lowered by up to 10%: ``delay = nominal * (1 - 0.1 * u)``. Jitter only ever shortens a delay, so every
delay stays within ``[0, max_delay_target]``, within ``[0.9 * target, target]`` of its phase, and the
total-time limit checked on the nominal delays still holds for jittered ones. ``jitter=False`` gives the
nominal delays exactly.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Literal

from .._validate import as_seconds, check_choice, check_int, check_number, check_seconds
from ._backoff import _schedule
from ._clock import RandomSource

__all__ = ["DeliveryPolicy"]

BackoffFunction = Literal["arithmetic", "exponential", "geometric", "linear"]
DeliveryPhase = Literal["immediate", "pre-backoff", "backoff", "post-backoff", "exhausted"]
SnsProtocol = Literal[
    "http", "https", "sqs", "lambda", "firehose", "email", "email-json", "sms", "application"
]

_BACKOFF_FUNCTIONS: tuple[str, ...] = ("arithmetic", "exponential", "geometric", "linear")
_PROTOCOLS: tuple[str, ...] = (
    "http", "https", "sqs", "lambda", "firehose", "email", "email-json", "sms", "application"
)
_HTTP_PROTOCOLS = frozenset({"http", "https"})

_R = 1.0 / 16.0
"""The geometric and exponential curves' decay over the whole backoff phase."""

_HTTP_MAX_TOTAL = 3600.0
"""SNS's hard limit on the total time of all retries of an HTTP/S delivery policy, in seconds."""

_HEALTHY_KEYS = {
    "minDelayTarget": "min_delay_target",
    "maxDelayTarget": "max_delay_target",
    "numRetries": "num_retries",
    "numNoDelayRetries": "num_no_delay_retries",
    "numMinDelayRetries": "num_min_delay_retries",
    "numMaxDelayRetries": "num_max_delay_retries",
    "backoffFunction": "backoff_function",
}


def _gap(function: str, x: float) -> float:
    """The fraction of the way from min to max still to go at progress ``x`` in [0, 1]."""
    rest = 1.0 - x
    if function == "linear":
        return rest
    if function == "arithmetic":
        return rest * rest
    if function == "geometric":
        return (math.pow(_R, x) - _R) / (1.0 - _R)
    return rest * rest * math.pow(_R, x)



def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    section = data.get(key, {})
    if not isinstance(section, Mapping):
        raise TypeError(f"{key} must be a JSON object, got {section!r}")
    return section


def _reject_unknown(where: str, section: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(
            f"unknown key(s) in {where}: {', '.join(unknown)}; expected some of {', '.join(sorted(known))}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryPolicy:
    """An Amazon SNS delivery policy: how SNS-style delivery retries are spaced (see the module docstring).

    Defaults are SNS's HTTP/S defaults: 3 retries, 20 s apart. It implements :class:`~asyncretry.Backoff`:
    ``delay(n, u)`` is the delay before retry ``n`` and :attr:`max_retries` is ``num_retries``.

    Args:
        min_delay_target: the pre-backoff delay and the first backoff delay, in seconds (1..3600, or a
            ``timedelta``). Default 20.
        max_delay_target: the last backoff delay and the post-backoff delay, in seconds
            (``min_delay_target``..3600). Default 20.
        num_retries: all retries of all phases (0..100 for HTTP/S; any number >= 0 otherwise). Default 3.
        num_no_delay_retries: retries of the immediate phase (>= 0). Default 0.
        num_min_delay_retries: retries of the pre-backoff phase (>= 0). Default 0.
        num_max_delay_retries: retries of the post-backoff phase (>= 0). Default 0.
            The three phase counts must add up to at most ``num_retries``; the backoff phase has the rest.
        backoff_function: ``"arithmetic"``, ``"exponential"``, ``"geometric"`` or ``"linear"`` (default).
        max_receives_per_second: the delivery rate cap per subscription (>= 1), or ``None`` (default) for
            none. Only carried here: the transport enforces it with a token bucket.
        jitter: lower each delay by up to 10% at random (default ``True``); ``False`` for exact delays.
        protocol: the SNS delivery protocol (default ``"http"``). SNS lets users set policies only for
            ``"http"``/``"https"``, and only there does it limit ``num_retries`` to 100 and the total time
            of all retries to 3600 s; the other protocols exist to model SNS's own policies
            (:meth:`aws_managed_endpoints`, :meth:`customer_managed_endpoints`), which exceed those limits.
        header_content_type: the ``requestPolicy.headerContentType`` of the JSON form, carried as is
            (default ``None``: SNS sends ``text/plain; charset=UTF-8``).

    Raises:
        ValueError: a value is out of range, the phases need more retries than ``num_retries``, or an
            HTTP/S policy's retries take more than 3600 s in total (the message gives the computed total).
        TypeError: a value has the wrong type.
    """

    JITTER_FRACTION: ClassVar[float] = 0.1
    """With jitter, a delay is lowered by up to this fraction of its nominal value."""

    min_delay_target: float | timedelta = 20.0
    max_delay_target: float | timedelta = 20.0
    num_retries: int = 3
    num_no_delay_retries: int = 0
    num_min_delay_retries: int = 0
    num_max_delay_retries: int = 0
    backoff_function: BackoffFunction = "linear"
    max_receives_per_second: int | None = None
    jitter: bool = True
    protocol: SnsProtocol = "http"
    header_content_type: str | None = None

    def __post_init__(self) -> None:
        protocol = check_choice("protocol", self.protocol, _PROTOCOLS)
        http = protocol in _HTTP_PROTOCOLS
        low = check_seconds("min_delay_target", self.min_delay_target, low=1.0, high=3600.0)
        object.__setattr__(self, "min_delay_target", low)
        high = check_seconds("max_delay_target", self.max_delay_target, low=1.0, high=3600.0)
        if high < low:
            raise ValueError(
                f"max_delay_target must be >= min_delay_target ({low:g} s) and <= 3600, "
                f"got {self.max_delay_target!r}"
            )
        object.__setattr__(self, "max_delay_target", high)
        retries = check_int("num_retries", self.num_retries, low=0, high=100 if http else None)
        phases = (
            check_int("num_no_delay_retries", self.num_no_delay_retries, low=0)
            + check_int("num_min_delay_retries", self.num_min_delay_retries, low=0)
            + check_int("num_max_delay_retries", self.num_max_delay_retries, low=0)
        )
        if phases > retries:
            raise ValueError(
                f"num_no_delay_retries + num_min_delay_retries + num_max_delay_retries ({phases}) must be "
                f"<= num_retries ({retries})"
            )
        check_choice("backoff_function", self.backoff_function, _BACKOFF_FUNCTIONS)
        if self.max_receives_per_second is not None:
            check_int("max_receives_per_second", self.max_receives_per_second, low=1)
        if not isinstance(self.jitter, bool):
            raise TypeError(f"jitter must be a bool, got {self.jitter!r} ({type(self.jitter).__name__})")
        if self.header_content_type is not None and not isinstance(self.header_content_type, str):
            raise TypeError(f"header_content_type must be a str or None, got {self.header_content_type!r}")
        if http:
            total = self.total_delay()
            if total > _HTTP_MAX_TOTAL:
                raise ValueError(
                    f"the total time of all retries is {total:g} s, above SNS's limit of 3600 s for HTTP/S "
                    f"endpoints (num_min_delay_retries={self.num_min_delay_retries} x "
                    f"min_delay_target={low:g} s, {self.num_backoff_retries} {self.backoff_function} "
                    f"backoff retries from {low:g} to "
                    f"{high:g} s, num_max_delay_retries={self.num_max_delay_retries} x max_delay_target="
                    f"{high:g} s); lower num_retries, the phase counts or the delay targets"
                )

    # -- presets --------------------------------------------------------------------------------------------

    @classmethod
    def aws_managed_endpoints(cls, *, protocol: SnsProtocol = "sqs") -> DeliveryPolicy:
        """SNS's policy for AWS-managed endpoints (Data Firehose, Lambda, SQS).

        3 immediate retries, 2 at 1 s, 10 exponential from 1 to 20 s, 100000 at 20 s: 100015 retries over
        more than 23 days. Outside the HTTP/S limits, so it needs a non-HTTP ``protocol`` (default
        ``"sqs"``).
        """
        return cls(
            min_delay_target=1.0,
            max_delay_target=20.0,
            num_retries=100_015,
            num_no_delay_retries=3,
            num_min_delay_retries=2,
            num_max_delay_retries=100_000,
            backoff_function="exponential",
            protocol=protocol,
        )

    @classmethod
    def customer_managed_endpoints(cls, *, protocol: SnsProtocol = "email") -> DeliveryPolicy:
        """SNS's policy for customer-managed endpoints (SMTP, SMS, mobile push).

        No immediate retries, 2 at 10 s, 10 exponential from 10 to 600 s, 38 at 600 s: 50 retries over more
        than 6 hours. Outside the HTTP/S total-time limit, so it needs a non-HTTP ``protocol`` (default
        ``"email"``).
        """
        return cls(
            min_delay_target=10.0,
            max_delay_target=600.0,
            num_retries=50,
            num_no_delay_retries=0,
            num_min_delay_retries=2,
            num_max_delay_retries=38,
            backoff_function="exponential",
            protocol=protocol,
        )

    # -- the JSON form ----------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str, *, protocol: SnsProtocol = "http") -> DeliveryPolicy:
        """Build a policy from SNS's JSON delivery policy (a mapping or JSON text).

        Accepts the subscription form ``{"healthyRetryPolicy": {...}, "throttlePolicy":
        {"maxReceivesPerSecond": n}, "requestPolicy": {"headerContentType": ...}}`` and the topic form
        ``{"http": {"defaultHealthyRetryPolicy": {...}, "defaultThrottlePolicy": {...},
        "defaultRequestPolicy": {...}, "disableSubscriptionOverrides": bool}}``. Missing keys take SNS's
        defaults; unknown keys are an error (they are usually typos that SNS would reject too).

        Args:
            data: the policy as a mapping or as JSON text.
            protocol: the protocol the policy applies to (default ``"http"``: the HTTP/S limits apply).

        Raises:
            ValueError: malformed JSON, an unknown key, or an invalid value.
            TypeError: a value has the wrong type.
        """
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise ValueError(f"the delivery policy is not valid JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise TypeError(f"the delivery policy must be a JSON object, got {data!r}")
        prefix = ""
        if "http" in data:  # the topic form
            _reject_unknown("the delivery policy", data, {"http"})
            data = _section(data, "http")
            prefix = "default"
            _reject_unknown(
                "http",
                data,
                {"defaultHealthyRetryPolicy", "defaultThrottlePolicy", "defaultRequestPolicy",
                 "disableSubscriptionOverrides"},
            )
        else:
            _reject_unknown(
                "the delivery policy", data, {"healthyRetryPolicy", "throttlePolicy", "requestPolicy"}
            )

        def key(name: str) -> str:
            return prefix + name[0].upper() + name[1:] if prefix else name

        healthy = _section(data, key("healthyRetryPolicy"))
        throttle = _section(data, key("throttlePolicy"))
        request = _section(data, key("requestPolicy"))
        _reject_unknown(key("healthyRetryPolicy"), healthy, set(_HEALTHY_KEYS))
        _reject_unknown(key("throttlePolicy"), throttle, {"maxReceivesPerSecond"})
        _reject_unknown(key("requestPolicy"), request, {"headerContentType"})
        kwargs: dict[str, Any] = {_HEALTHY_KEYS[k]: v for k, v in healthy.items()}
        if isinstance(kwargs.get("backoff_function"), str):
            kwargs["backoff_function"] = kwargs["backoff_function"].lower()
        if "maxReceivesPerSecond" in throttle:
            kwargs["max_receives_per_second"] = throttle["maxReceivesPerSecond"]
        if "headerContentType" in request:
            kwargs["header_content_type"] = request["headerContentType"]
        return cls(protocol=protocol, **kwargs)

    def to_json(self) -> dict[str, Any]:
        """Return the policy in SNS's subscription JSON form (the inverse of :meth:`from_json`).

        Delay targets are written as integers when they are whole seconds, as SNS expects.
        """

        def number(value: float | timedelta) -> float | int:
            seconds = as_seconds(value)
            return int(seconds) if seconds.is_integer() else seconds

        result: dict[str, Any] = {
            "healthyRetryPolicy": {
                "minDelayTarget": number(self.min_delay_target),
                "maxDelayTarget": number(self.max_delay_target),
                "numRetries": self.num_retries,
                "numNoDelayRetries": self.num_no_delay_retries,
                "numMinDelayRetries": self.num_min_delay_retries,
                "numMaxDelayRetries": self.num_max_delay_retries,
                "backoffFunction": self.backoff_function,
            }
        }
        if self.max_receives_per_second is not None:
            result["throttlePolicy"] = {"maxReceivesPerSecond": self.max_receives_per_second}
        if self.header_content_type is not None:
            result["requestPolicy"] = {"headerContentType": self.header_content_type}
        return result

    # -- phases ---------------------------------------------------------------------------------------------

    @property
    def max_retries(self) -> int:
        """The number of retries the policy makes: ``num_retries``."""
        return self.num_retries

    @property
    def num_backoff_retries(self) -> int:
        """The retries of the backoff phase: ``num_retries`` minus the three other phases."""
        others = self.num_no_delay_retries + self.num_min_delay_retries + self.num_max_delay_retries
        return self.num_retries - others

    def phase(self, attempt: int) -> DeliveryPhase:
        """Return the phase of retry number ``attempt`` (1-based), or ``"exhausted"`` past ``num_retries``.

        Raises:
            ValueError: ``attempt < 1``.
        """
        return self._locate(attempt)[0]

    def _locate(self, attempt: int) -> tuple[DeliveryPhase, int]:
        """Return the phase of retry ``attempt`` and its 0-based index within the phase."""
        index = check_int("attempt", attempt, low=1) - 1
        phases: tuple[tuple[DeliveryPhase, int], ...] = (
            ("immediate", self.num_no_delay_retries),
            ("pre-backoff", self.num_min_delay_retries),
            ("backoff", self.num_backoff_retries),
            ("post-backoff", self.num_max_delay_retries),
        )
        for phase, count in phases:
            if index < count:
                return phase, index
            index -= count
        return "exhausted", index

    def nominal_delay(self, attempt: int) -> float:
        """Return the delay before retry ``attempt`` without jitter, in seconds.

        Past ``num_retries`` it stays at ``max_delay_target``; the caller stops at :attr:`max_retries`.

        Raises:
            ValueError: ``attempt < 1``.
        """
        phase, index = self._locate(attempt)
        low, high = as_seconds(self.min_delay_target), as_seconds(self.max_delay_target)
        if phase == "immediate":
            return 0.0
        if phase == "pre-backoff":
            return low
        if phase == "backoff":
            return self._backoff_delay(index, low, high)
        return high

    def _backoff_delay(self, index: int, low: float, high: float) -> float:
        steps = self.num_backoff_retries - 1
        if steps <= 0:
            return low
        x = index / steps
        return min(high, max(low, low + (high - low) * (1.0 - _gap(self.backoff_function, x))))

    def total_delay(self) -> float:
        """Return the total of all ``num_retries`` nominal delays in seconds (an upper bound with jitter)."""
        low, high = as_seconds(self.min_delay_target), as_seconds(self.max_delay_target)
        backoff = math.fsum(self._backoff_delay(i, low, high) for i in range(self.num_backoff_retries))
        return self.num_min_delay_retries * low + backoff + self.num_max_delay_retries * high

    # -- the Backoff protocol -------------------------------------------------------------------------------

    def delay(self, attempt: int, u: float, previous: float | None = None) -> float:
        """Return the delay before retry ``attempt`` (1-based) in seconds.

        Args:
            attempt: the retry number, i.e. the 1-based number of the delivery attempt that failed.
            u: a random number in ``[0, 1)`` (1.0 accepted); with jitter the delay is
                ``nominal * (1 - 0.1 * u)``, without it ``u`` is ignored.
            previous: ignored.

        Raises:
            ValueError: ``attempt < 1`` or ``u`` outside ``[0, 1]``.
        """
        nominal = self.nominal_delay(attempt)
        u = check_number("u", u, low=0.0, high=1.0)
        if not self.jitter:
            return nominal
        return nominal * (1.0 - self.JITTER_FRACTION * u)

    def bounds(self, attempt: int) -> tuple[float, float]:
        """Return ``(min, max)`` of the delay before retry ``attempt``, in seconds."""
        nominal = self.nominal_delay(attempt)
        if not self.jitter:
            return (nominal, nominal)
        return (nominal * (1.0 - self.JITTER_FRACTION), nominal)

    def schedule(self, attempts: int, rng: RandomSource | None = None) -> list[float]:
        """Return the delays before retries ``1..attempts`` (at most ``num_retries``), in seconds.

        With ``rng=None`` these are the nominal delays.
        """
        return _schedule(self, attempts, rng)
