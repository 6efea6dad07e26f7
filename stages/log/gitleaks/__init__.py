"""Gitleaks' default rule set (vendored, MIT) run over text as gitleaks runs it over files:
keyword prefilter, RE2 patterns translated for ``re``, entropy thresholds, allow-lists."""

from stages.log.gitleaks.rules import rule_set
from stages.log.gitleaks.scan import find_secrets, named_value_allowed, vendor_token_allowed

__all__ = ["find_secrets", "named_value_allowed", "rule_set", "vendor_token_allowed"]
