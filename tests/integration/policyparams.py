"""A custom resource kind for the params of admission policy tests (validating and
mutating), and how to tell a policy whose params are not yet seen.

Not a ConfigMap: kube-apiserver 1.36 takes a built-in param kind's informer from its
shared informer factory and starts it with the first policy's context, so once that
policy is deleted the informer stops and later policies never see a new ConfigMap (a
second run of a ConfigMap test on the same server fails with "no params found for policy
binding with `Deny` parameterNotFoundAction"). A custom kind's informer is the policy's own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.integration.rawhttp import Response, http, ok

__all__ = ["param_kind", "params_pending"]

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@contextmanager
def param_kind(api_client: Any) -> Iterator[tuple[str, str]]:
    """A namespaced custom resource kind for params (``TeamParams`` in a group of its
    own, ``data`` a map of strings), served until the block ends; its resource path
    prefix and apiVersion."""
    group = f"params{os.urandom(4).hex()}.example.com"
    crd = {
        "metadata": {"name": f"teamparams.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "teamparams", "singular": "teamparam", "kind": "TeamParams"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "data": {
                                    "type": "object",
                                    "additionalProperties": {"type": "string"},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    ok(http(api_client, "POST", CRDS, body=crd), 201)
    try:
        deadline = time.monotonic() + 30
        while http(api_client, "GET", f"/apis/{group}/v1/teamparams").status != 200:
            assert time.monotonic() < deadline, f"{group} is not served"
            time.sleep(0.2)
        yield f"/apis/{group}/v1", f"{group}/v1"
    finally:
        http(api_client, "DELETE", f"{CRDS}/teamparams.{group}")


def params_pending(answer: Response) -> bool:
    """Whether ``answer`` refuses a write because the policy has not yet seen its params
    (or their kind): a real server's informers catch up after a moment."""
    message = str(answer.body.get("message"))
    return any(
        reason in message
        for reason in (
            "no params found",
            "failed to find resource referenced by paramKind",
            "not yet synced to use for admission",
        )
    )
