"""Whose the request's bearer token is: the routes ask it of every request, and the request
guard of a turn it would refuse for the gateway's load, which only an authenticated client may
learn."""

from __future__ import annotations

import hmac

from pipeline.serve.gateway_config import ServeConfig
from pipeline.serve.openai_compat import ApiError

ANONYMOUS = "anonymous"


def token_owner(config: ServeConfig, authorization: str) -> str:
    """The owner of the token in the ``Authorization`` header's value; 401 without a valid
    one."""
    if not config.auth:
        return ANONYMOUS
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "You didn't provide an API key. Send it in the Authorization "
                       "header: 'Authorization: Bearer YOUR_TOKEN'.", code="invalid_api_key")
    for known, owner in config.tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            return owner
    raise ApiError(401, "Incorrect API key provided.", code="invalid_api_key")
