"""The HTTP rules every asyncretry HTTP integration shares, whatever the client (httpx, aiohttp).

* ``_retry_after``, ``_quota_headers`` and ``_body`` read what a server sent (``Retry-After`` in all its
  forms, the quota it announces, bounded error bodies and the error codes in them); they import nothing
  from asyncretry, so the engine reads the headers of an exception's response with them too;
* ``_rules`` holds the classification of HTTP outcomes (statuses, error codes, idempotency, sending a
  request again), ``_overrides`` the per-request options and who may be hedged; both build on the
  engine's public API and serve the integrations only.

Nothing here imports an HTTP client: each integration adds what only its client knows (its exception
types, its request bodies, its response objects). This ``__init__`` imports nothing, so that the
engine can import ``_retry_after`` while ``asyncretry`` itself is being imported.
"""
