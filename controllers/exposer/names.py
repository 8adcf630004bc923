"""Name and path rules of the Kubernetes API, as the exposer checks them before writing
(apimachinery ``pkg/util/validation``; the Ingress path rules of
``pkg/apis/networking/validation``).

Each function returns a list of problems (empty: valid), like apimachinery's ``Is*``.

Thread-safe: pure functions.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "dns1035_label_errors",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "host_errors",
    "http_path_errors",
    "port_name_errors",
]

_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_PORT_NAME_CHARS: Final = re.compile(r"[-a-z0-9]+")
_PORT_NAME_LETTER: Final = re.compile(r".*[a-z].*")
# RFC 3986 path characters: unreserved, sub-delims, ":", "@", "/" and %-escapes.
_HTTP_PATH: Final = re.compile(r"/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")
_BAD_PATH_SEQUENCES: Final = ("//", "/./", "/../", "%2f", "%2F")
_BAD_PATH_SUFFIXES: Final = ("/..", "/.")
MAX_PATH_LENGTH: Final = 1024


def dns1123_label_errors(value: str) -> list[str]:
    """RFC 1123 label: lower-case alphanumerics and '-', at most 63 characters."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.fullmatch(value):
        errs.append(
            "must consist of lower case alphanumeric characters or '-', and must start "
            "and end with an alphanumeric character"
        )
    return errs


def dns1035_label_errors(value: str) -> list[str]:
    """RFC 1035 label (Service names): like RFC 1123 but starting with a letter."""
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _DNS1035_LABEL.fullmatch(value):
        errs.append(
            "must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character"
        )
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    """RFC 1123 subdomain: dot-separated labels, at most 253 characters."""
    errs = []
    if len(value) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(
            "must consist of lower case alphanumeric characters, '-' or '.', and must "
            "start and end with an alphanumeric character"
        )
    elif any(len(label) > 63 for label in value.split(".")):
        errs.append("each dot-separated label must be no more than 63 characters")
    return errs


def host_errors(value: str) -> list[str]:
    """An Ingress host: a DNS subdomain (no wildcard), not an IP address."""
    errs = dns1123_subdomain_errors(value)
    if errs:
        return errs
    if all(label.isdigit() for label in value.split(".")):
        return ["must be a DNS name, not an IP address"]
    return []


def http_path_errors(value: str) -> list[str]:
    """An Ingress path: absolute, RFC 3986 characters, no empty or dot segments."""
    if not value.startswith("/"):
        return ["must start with '/'"]
    errs = []
    if len(value) > MAX_PATH_LENGTH:
        errs.append(f"must be no more than {MAX_PATH_LENGTH} characters")
    if not _HTTP_PATH.fullmatch(value):
        errs.append("may contain only URL path characters (RFC 3986) and %-escapes")
    errs.extend(f"must not contain {seq!r}" for seq in _BAD_PATH_SEQUENCES if seq in value)
    errs.extend(f"must not end with {s!r}" for s in _BAD_PATH_SUFFIXES if value.endswith(s))
    return errs


def port_name_errors(value: str) -> list[str]:
    """IANA service name (container and Service port names): at most 15 characters,
    lower-case alphanumerics and '-', at least one letter, no '--', no '-' at the ends."""
    errs = []
    if not 1 <= len(value) <= 15:
        errs.append("must be no more than 15 characters")
    if not _PORT_NAME_CHARS.fullmatch(value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if not _PORT_NAME_LETTER.fullmatch(value):
        errs.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs
