"""The phrase and code tables the error classifier matches, grouped by what they mean.

Each phrase is a lower-case, verbatim fragment of a real provider error; the corpus in
``tests/corpus/errors/`` holds the bodies they come from, with their sources. Groups are kept
narrow so that one does not swallow another; ``stages.recovery.classify`` decides the order.
"""

from __future__ import annotations

import types

# Per-prompt safety decisions (OpenAI moderation and Codex cyber filter, Anthropic safety,
# OpenRouter's moderation 403).
CONTENT_POLICY: tuple[str, ...] = (
    "flagged for possible cybersecurity risk", "trusted access for cyber",
    "violates our usage policies", "violates openai's usage policies",
    "your request was flagged by", "rejected as a result of our safety system",
    "prompt was flagged by our safety", "responses cannot be generated due to safety",
    "your input was flagged for", "content management policy",
)

PAYLOAD_TOO_LARGE: tuple[str, ...] = (
    "request entity too large", "payload too large", "error code: 413", "request_too_large",
    "exceeds the maximum allowed number of bytes",
)

# Context-window phrases of OpenAI, Anthropic, llama.cpp, vLLM, Ollama, Gemini, Bedrock and
# others.
CONTEXT_OVERFLOW: tuple[str, ...] = (
    "maximum context length", "context length", "context_length_exceeded", "context window",
    "context size", "exceeds the available context size", "prompt is too long",
    "prompt exceeds max length", "too many tokens", "reduce the length",
    "maximum number of tokens", "exceeds the max_model_len", "max_model_len",
    "maximum model length", "input is too long", "truncating input", "slot context",
    "n_ctx_slot", "exceeds the maximum number of input tokens", "max input token",
    "token limit", "exceed context limit", "exceeds the context window",
    "input token count", "超过最大长度", "上下文长度",
)

# The request asks for more output tokens than the model may produce: lower max_tokens.
OUTPUT_CAP: tuple[str, ...] = (
    "maximum allowed number of output tokens", "max_tokens is too large",
    "'max_tokens' or 'max_completion_tokens' is too large", "completion tokens, whereas you",
    "max_completion_tokens is too large", "max_output_tokens is too large",
)

IMAGE_TOO_LARGE: tuple[str, ...] = (
    "image exceeds", "image_too_large", "image too large", "image is too large",
    "image dimensions exceed",
)

# Replayed reasoning items (OpenAI Responses ``encrypted_content``) the server cannot read.
ENCRYPTED_CONTENT: tuple[str, ...] = (
    "invalid_encrypted_content", "encrypted content could not be",
    "the encrypted content for item",
)

# Anthropic refuses the 1M-context beta header for this subscription or credential.
LONG_CONTEXT_BETA: tuple[str, ...] = (
    "long context beta is not yet available",
    "incompatible with the long context beta",
)

# The provider refuses the whole account, project or network, whatever the key: another key
# of the same account will not help.
ACCOUNT_BLOCKED: tuple[str, ...] = (
    "unsupported_country_region_territory", "country, region, or territory not supported",
    "user location is not supported", "not available in your country",
    "not available in your region", "has not been used in project", "service_disabled",
    "api_key_service_blocked", "are blocked.", "virtual network", "firewall rules",
    "public access is disabled", "private endpoint", "organization has been disabled",
)

# A 404 that names a path, not a model: the URL is wrong (a configuration error).
WRONG_ENDPOINT: tuple[str, ...] = (
    "invalid url", "resource not found", "file not found", "404 page not found",
)

# A 5xx whose message says the request itself is malformed (llama.cpp answers these with 500):
# sent again unchanged it fails again.
REQUEST_INVALID: tuple[str, ...] = (
    "failed to parse tool call arguments", "json.exception.parse_error",
    "requires --jinja flag", "unsupported param:", "cannot use tools with stream",
)

# A 4xx the server itself says may pass if sent again.
RETRY_ADVICE: tuple[str, ...] = (
    "try again", "please retry", "retry your request", "retry later", "retry shortly",
)

# Credit or quota exhaustion: does not resolve by waiting a few seconds.
BILLING: tuple[str, ...] = (
    "insufficient credits", "insufficient_quota", "insufficient balance", "credit balance",
    "credits exhausted", "credits have been exhausted", "no usable credits",
    "top up your credits", "payment required", "billing hard limit",
    "exceeded your current quota", "check your plan and billing", "account is deactivated",
    "plan does not include", "out of funds", "balance_depleted",
    "not available on the free tier", "out of extra usage", "budget has been exceeded",
    "exceededbudget", "budget_exceeded", "over budget", "requires more credits",
)

# Ambiguous usage-limit wording, disambiguated by a transient signal (rate limit) or not.
USAGE_LIMIT: tuple[str, ...] = ("usage limit", "quota", "limit exceeded")
USAGE_LIMIT_TRANSIENT: tuple[str, ...] = (
    "try again", "retry", "resets at", "resets in", "reset at", "reset in", "wait",
    "requests remaining", "periodic", "window", "per minute", "per day",
)

RATE_LIMIT: tuple[str, ...] = (
    "rate limit", "rate_limit", "ratelimit", "rate-limited", "too many requests", "throttled",
    "throttling", "requests per minute", "tokens per minute", "requests per day",
    "try again in", "please retry after", "resource_exhausted", "resource exhausted",
    "rate increased too quickly", "too many concurrent requests",
)

OVERLOADED: tuple[str, ...] = (
    "overloaded", "at capacity", "over capacity", "service unavailable",
    "temporarily unavailable", "no capacity", "no deployments available", "loading model",
)

# An OAuth credential that is gone for good: refreshing it will not help.
REVOKED: tuple[str, ...] = (
    "token_revoked", "token revoked", "token_invalidated", "invalid_grant",
    "refresh_token_reused", "unauthorized_client",
)

# Revoked or forbidden: this key may not do this.
AUTH_PERMANENT: tuple[str, ...] = (
    *REVOKED,
    "permission denied", "permission_denied", "access denied", "forbidden",
    "not allowed to access",
)

AUTH: tuple[str, ...] = (
    "invalid api key", "invalid_api_key", "incorrect api key", "invalid x-api-key",
    "api key not valid", "no api key", "missing api key", "authentication", "unauthorized",
    "invalid token", "token expired", "expired token", "invalid bearer", "no auth credentials",
    "invalid proxy server token", "api key not found",
)

MODEL_NOT_FOUND: tuple[str, ...] = (
    "model not found", "model_not_found", "is not a valid model", "invalid model",
    "no such model", "unknown model", "unsupported model", "no endpoints found",
    "no endpoints available", "does not have access to model", "try pulling it first",
    "deployment for this resource does not exist",
)

TIMEOUT: tuple[str, ...] = (
    "timed out", "timeout", "deadline exceeded", "time out", "took too long",
)

# Disconnects and network failures reported without an HTTP status.
TRANSPORT: tuple[str, ...] = (
    "connection reset", "connection refused", "connection aborted", "connection error",
    "connection was closed", "connection lost", "server disconnected", "remote end closed",
    "remoteprotocolerror", "peer closed connection", "broken pipe", "incomplete chunked read",
    "unexpected eof", "eof occurred", "stream ended", "stream was cut", "network is unreachable",
    "name or service not known", "temporary failure in name resolution", "bad record mac",
    "ssl alert", "tls alert", "[ssl:",
)

# Exception class names (the last dotted segment, lower-cased) the adapters may record.
TIMEOUT_TYPES: frozenset[str] = frozenset({
    "providertimeouterror", "timeouterror", "timeout", "readtimeout", "connecttimeout",
    "pooltimeout", "writetimeout", "apitimeouterror", "timeoutexception",
})
TRANSPORT_TYPES: frozenset[str] = frozenset({
    "providerunavailableerror", "connectionerror", "connecterror", "remoteprotocolerror",
    "apiconnectionerror", "readerror", "writeerror", "networkerror", "transporterror",
    "oserror", "brokenpipeerror", "connectionreseterror", "connectionrefusederror",
    "connectionabortederror", "incompleteread", "serverdisconnectederror", "sslerror",
    "ssleoferror", "sslzeroreturnerror", "protocolerror",
})
# The reply arrived but could not be used (no choices, broken JSON): the server's fault.
FORMAT_TYPES: frozenset[str] = frozenset({
    "modelbehaviourerror", "jsondecodeerror", "validationerror", "decodingerror",
})

# Body error codes (``error.code``/``type``/``status``, Google's ``reason``), lower-cased, to
# the value of a ``FailureReason``. Generic types such as ``invalid_request_error`` are absent
# on purpose: they say nothing about the cause.
CODES: types.MappingProxyType[str, str] = types.MappingProxyType({
    **dict.fromkeys(("context_length_exceeded", "exceed_context_size_error",
                     "context_window_exceeded", "max_tokens_exceeded",
                     "string_above_max_length", "prompt_too_long"), "context_overflow"),
    **dict.fromkeys(("request_too_large", "payload_too_large"), "payload_too_large"),
    **dict.fromkeys(("rate_limit_exceeded", "rate_limit_error", "rate_limited",
                     "resource_exhausted", "throttled", "throttlingexception",
                     "too_many_requests", "usage_limit_reached", "tokens_exceeded",
                     "requests_exceeded"), "rate_limit"),
    **dict.fromkeys(("insufficient_quota", "billing_hard_limit_reached", "billing_not_active",
                     "insufficient_credits", "insufficient_balance", "payment_required",
                     "balance_depleted", "credits_exhausted", "account_deactivated",
                     "budget_exceeded"), "billing"),
    **dict.fromkeys(("invalid_api_key", "authentication_error", "invalid_authentication",
                     "unauthenticated", "unauthorized", "token_expired", "expired_token",
                     "missing_api_key", "api_key_invalid", "auth_error"), "auth"),
    **dict.fromkeys(("permission_error", "permission_denied", "forbidden", "token_revoked",
                     "invalid_grant"), "auth_permanent"),
    **dict.fromkeys(("unsupported_country_region_territory", "service_disabled",
                     "api_key_service_blocked"), "account_blocked"),
    **dict.fromkeys(("model_not_found", "not_found_error", "model_not_available",
                     "unknown_model", "invalid_model", "deployment_not_found",
                     "deploymentnotfound", "not_found", "operationnotsupported"),
                    "model_not_found"),
    **dict.fromkeys(("content_filter", "content_policy_violation", "content_policy",
                     "responsibleaipolicyviolation", "moderation_blocked", "safety",
                     "invalid_prompt"), "content_policy_blocked"),
    **dict.fromkeys(("overloaded_error", "overloaded", "server_overloaded", "unavailable",
                     "unavailable_error", "service_unavailable", "engine_overloaded"),
                    "overloaded"),
    **dict.fromkeys(("api_error", "server_error", "internal_error", "internal_server_error",
                     "internal", "internalservererror"), "server_error"),
    **dict.fromkeys(("timeout", "request_timeout", "deadline_exceeded", "gateway_timeout"),
                    "timeout"),
    **dict.fromkeys(("invalid_encrypted_content",), "invalid_encrypted_content"),
    **dict.fromkeys(("unknown_parameter", "unsupported_parameter", "invalid_value",
                     "invalid_type", "invalid_json", "unsupported_value"), "format_error"),
})
