"""Upstream credentials: what authenticates each request to a deployment, by the scheme its
``Wire.auth`` names (docs/routing.md, "Credentials").

- ``x-api-key`` (anthropic) and ``bearer`` (a Bedrock API key): the deployment's key
  (``api_key`` / ``api_key_env``), static.
- ``sigv4`` (bedrock): botocore's credential chain, signed per request (``aws.AwsSource``).
- ``google`` (vertex): a google-auth access token (``google.GoogleSource``).

Every deployment gets one ``Credentials``; deployments naming the same AWS profile (or none) or
the same Google key file (or ADC) share one source and its one refresh loop (``Providers``).
``headers`` is synchronous and cheap, for the request path on the event loop; every network
fetch runs in a worker thread ahead of expiry (``refresh.Refresher``). No key, token, secret or
signature is ever logged or put in an error message.

The code is in ``providers.py``; this file only re-exports its public names.
"""

from __future__ import annotations

from .providers import Credentials, NoCredentials, Providers
from .refresh import CredentialsUnavailable, RefreshStats

__all__ = [
    "Credentials",
    "CredentialsUnavailable",
    "NoCredentials",
    "Providers",
    "RefreshStats",
]
