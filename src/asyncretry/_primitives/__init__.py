"""Primitives: clock, token bucket, retry quota, adaptive limiter, backoff, circuit breaker.

Nothing in this package knows about HTTP or the retry engine; imports flow from the engine and the
integrations into here, never the other way.
"""
