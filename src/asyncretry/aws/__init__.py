"""asyncretry as the AWS SDK's retry handler: one call makes it retry a boto3, botocore or aiobotocore client.

    handler = asyncretry.aws.install(client)    # or install_session(session): every client it makes

See :func:`install` for the options and :func:`policy_for` for how the client's retry config is read.
"""

from __future__ import annotations

from ._config import LONG_POLLING_OPERATIONS as LONG_POLLING_OPERATIONS
from ._config import SERVICE_DEFAULTS_2026 as SERVICE_DEFAULTS_2026
from ._config import policy_for as policy_for
from ._config import sdk_profile as sdk_profile
from ._handler import AsyncClientRetryHandler as AsyncClientRetryHandler
from ._handler import ClientRetryHandler as ClientRetryHandler
from ._handler import install as install
from ._handler import install_session as install_session
from ._judge import retry_history as retry_history

__all__ = [
    "LONG_POLLING_OPERATIONS",
    "SERVICE_DEFAULTS_2026",
    "AsyncClientRetryHandler",
    "ClientRetryHandler",
    "install",
    "install_session",
    "policy_for",
    "retry_history",
    "sdk_profile",
]
