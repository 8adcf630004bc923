"""Subresources and create-only resources: what kube-apiserver's special REST storages do.

* ``{deployments,replicasets,statefulsets,replicationcontrollers}/scale``: GET, PUT and
  PATCH an ``autoscaling/v1 Scale`` (``pkg/registry/apps/deployment/storage``
  ``ScaleREST``): ``spec.replicas`` of the parent, ``status.replicas`` and the selector
  as a string.
* ``pods/binding`` and ``bindings``: set ``spec.nodeName`` (409 once assigned) and the
  ``PodScheduled`` condition (``pkg/registry/core/pod/storage`` ``BindingREST``).
* ``pods/eviction``: delete the pod unless a PodDisruptionBudget forbids it (429), as
  ``EvictionREST`` does: pods that are Pending, Succeeded, Failed or already
  terminating are evicted without looking at budgets; more than one matching budget
  is a 500; a budget that its controller has not observed, or that allows no
  disruption, is a 429.
* ``pods/log``: a pod without a node answers 204 No Content (the ``LocationStreamer``
  with no location gives no stream); a pod on a node answers as the kubelet does for
  containers that never started.
* ``serviceaccounts/token``: a ``TokenRequest`` answered with a signed-looking JWT and
  its ``expirationTimestamp``; the server's :class:`~apiserver.machinery.authenticator.
  Authenticator` remembers it, so it authenticates requests and TokenReviews.
* ``certificatesigningrequests/approval``: the conditions only.
* The access reviews, answered by the server's RBAC authorizer when it enforces RBAC
  (else every request is allowed, and they say so), ``SelfSubjectRulesReview``,
  ``SelfSubjectReview`` and ``TokenReview``.

Thread-safety: functions over :class:`~apiserver.machinery.rest.Rest`, which holds the
storage lock for each read-modify-write.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import secrets
import uuid
from typing import Any, Final

import orjson

from apiserver.api.resources import ResourceRegistry, ServedResource
from apiserver.machinery import patch as patching
from apiserver.machinery.authenticator import ANONYMOUS, Authenticator, IssuedToken, UserInfo
from apiserver.machinery.authorizer import Attributes, RbacAuthorizer
from apiserver.machinery.rest import DeleteOptions, ListOptions, Rest, StatusError, status_object
from manager.labels import SelectorError, label_selector_from_dict

__all__ = [
    "CREATE_ONLY_KINDS",
    "apiservice_status",
    "bootstrap_apiservices",
    "create_only",
    "handle",
]

JsonDict = dict[str, Any]

ISSUER: Final = "https://kubernetes.default.svc.cluster.local"
CREATE_ONLY_KINDS: Final = frozenset(
    {
        "Binding",
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "SelfSubjectReview",
        "TokenReview",
    }
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ts(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _body(obj: Any, kind: str) -> JsonDict:
    if not isinstance(obj, dict):
        raise StatusError(400, "BadRequest", f"the body must be a {kind} object")
    if obj.get("kind") not in (None, kind):
        raise StatusError(
            400,
            "BadRequest",
            f"the object provided is unrecognized (must be of type {kind}): "
            f"kind {obj.get('kind')!r}",
        )
    return obj


def _invalid(
    kind: str, group: str, name: str, *, field: str, value: Any, detail: str
) -> StatusError:
    shown = f'"{value}"' if isinstance(value, str) else str(value)
    message = f"{field}: Invalid value: {shown}: {detail}"
    qualified = f"{kind}.{group}" if group else kind
    details: JsonDict = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": message.partition(": ")[2], "field": field}
    ]
    return StatusError(422, "Invalid", f'{qualified} "{name}" is invalid: {message}', details)


# --- scale -----------------------------------------------------------------------------


def _selector_text(served: ServedResource, obj: JsonDict) -> str:
    selector = (obj.get("spec") or {}).get("selector")
    if served.resource.kind == "ReplicationController":
        return ",".join(f"{k}={v}" for k, v in sorted((selector or {}).items()))
    if not isinstance(selector, dict):
        return ""
    try:
        return str(label_selector_from_dict(selector))
    except SelectorError:
        return ""


def scale_of(served: ServedResource, obj: JsonDict) -> JsonDict:
    """The ``autoscaling/v1 Scale`` view of a scalable object."""
    meta = obj.get("metadata") or {}
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    scale_status: JsonDict = {"replicas": int(status.get("replicas") or 0)}
    selector = _selector_text(served, obj)
    if selector:
        scale_status["selector"] = selector
    scale_spec: JsonDict = {}
    if spec.get("replicas"):
        scale_spec["replicas"] = spec["replicas"]
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": scale_spec,
        "status": scale_status,
    }


def _put_scale(
    rest: Rest,
    served: ServedResource,
    ns: str | None,
    name: str,
    scale: JsonDict,
    *,
    manager: str,
    dry_run: bool,
) -> JsonDict:
    scale = _body(scale, "Scale")
    replicas = (scale.get("spec") or {}).get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise StatusError(400, "BadRequest", "spec.replicas: expected an integer")
    if replicas < 0:
        raise _invalid(
            "Scale",
            "autoscaling",
            name,
            field="spec.replicas",
            value=replicas,
            detail="must be greater than or equal to 0",
        )
    with rest.storage.lock:
        current = copy.deepcopy(rest.get(served, ns, name))
        rv = str((scale.get("metadata") or {}).get("resourceVersion") or "")
        if rv and rv != current["metadata"]["resourceVersion"]:
            raise rest._conflict(served, name)
        current.setdefault("spec", {})["replicas"] = replicas
        updated = rest.update(served, ns, name, current, manager=manager, dry_run=dry_run)
    return scale_of(served, updated)


def _patch_scale(
    rest: Rest,
    served: ServedResource,
    ns: str | None,
    name: str,
    *,
    body: bytes,
    content_type: str,
    manager: str,
    dry_run: bool,
) -> JsonDict:
    ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise StatusError(400, "BadRequest", f"error decoding patch: {exc}") from None
    with rest.storage.lock:
        current = scale_of(served, rest.get(served, ns, name))
        try:
            if ctype == "application/merge-patch+json":
                new = patching.json_merge_patch(current, doc)
            elif ctype == "application/json-patch+json":
                new = patching.json_patch(current, doc)
            elif ctype == "application/strategic-merge-patch+json":
                new = patching.strategic_merge_patch(current, doc, "Scale")
            else:
                raise StatusError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/strategic-merge-patch+json",
                )
        except patching.PatchError as exc:
            raise StatusError(exc.status, exc.reason, exc.message, exc.details) from None
        return _put_scale(rest, served, ns, name, new, manager=manager, dry_run=dry_run)


# --- pods ------------------------------------------------------------------------------


def bind(rest: Rest, pods: ServedResource, ns: str, binding: Any, *, name: str = "") -> JsonDict:
    """``pods/binding`` (and the ``bindings`` resource): assign the pod to a node."""
    binding = _body(binding, "Binding")
    meta = binding.get("metadata") or {}
    pod_name = name or str(meta.get("name") or "")
    if name and meta.get("name") and meta["name"] != name:
        raise StatusError(
            400, "BadRequest", f"name in URL does not match name in Binding object: {meta['name']}"
        )
    target = binding.get("target") or {}
    node = str(target.get("name") or "")
    if not node:
        raise StatusError(
            422,
            "Invalid",
            f'Binding "{pod_name}" is invalid: target.name: Required value',
            {"name": pod_name, "kind": "Binding", "causes": [
                {"reason": "FieldValueRequired", "message": "Required value",
                 "field": "target.name"}]},
        )  # fmt: skip
    with rest.storage.lock:
        pod = copy.deepcopy(rest.get(pods, ns, pod_name))
        spec = pod.setdefault("spec", {})
        if pod["metadata"].get("deletionTimestamp"):
            raise StatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{pod_name}": '
                f"pod {pod_name} is being deleted, cannot be assigned to a host",
                {"name": pod_name, "kind": "pods/binding"},
            )
        if spec.get("nodeName"):
            raise StatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{pod_name}": '
                f'pod {pod_name} is already assigned to node "{spec["nodeName"]}"',
                {"name": pod_name, "kind": "pods/binding"},
            )
        spec["nodeName"] = node
        for key in ("annotations", "labels"):
            extra = meta.get(key) or {}
            if extra:
                pod["metadata"].setdefault(key, {}).update(extra)
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": _ts(_now()),
            }
        )
        status["conditions"] = conditions
        # Written as the binding storage does: not a pod update (spec.nodeName is
        # immutable there), a direct write of the assigned pod.
        pod["metadata"]["resourceVersion"] = str(rest.storage.next_revision())
        rest.storage.commit("MODIFIED", rest._key(pods, ns, pod_name), pod)
    return status_object(201, "", "")


def _pod_ready(pod: JsonDict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def evict(
    rest: Rest,
    registry: ResourceRegistry,
    pods: ServedResource,
    ns: str,
    name: str,
    *,
    eviction: Any,
    manager: str,
) -> JsonDict:
    """``pods/eviction``: delete the pod if its disruption budget allows (else 429)."""
    eviction = _body(eviction, "Eviction")
    meta = eviction.get("metadata") or {}
    if meta.get("name") and meta["name"] != name:
        raise StatusError(
            400, "BadRequest", f"name in URL does not match name in Eviction object: {meta['name']}"
        )
    raw_options = eviction.get("deleteOptions") or {}
    grace = raw_options.get("gracePeriodSeconds")
    options = DeleteOptions(
        propagation_policy=str(raw_options.get("propagationPolicy") or ""),
        preconditions=dict(raw_options.get("preconditions") or {}),
        grace_period_seconds=int(grace) if grace is not None else None,
        dry_run="All" in (raw_options.get("dryRun") or []),
    )
    pdbs_served = registry.lookup("policy", "v1", "poddisruptionbudgets")
    assert pdbs_served is not None
    with rest.storage.lock:
        pod = rest.get(pods, ns, name)
        phase = (pod.get("status") or {}).get("phase")
        ignore = phase in ("Succeeded", "Failed", "Pending") or bool(
            pod["metadata"].get("deletionTimestamp")
        )
        if not ignore:
            labels = pod["metadata"].get("labels") or {}
            matching = []
            for pdb in rest.list(pdbs_served, ns, ListOptions())["items"]:
                selector = (pdb.get("spec") or {}).get("selector")
                if not isinstance(selector, dict):
                    continue
                try:
                    sel = label_selector_from_dict(selector)
                except SelectorError:
                    continue
                if not sel.empty() and sel.matches(labels):
                    matching.append(pdb)
            if len(matching) > 1:
                raise StatusError(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                )
            if matching:
                _check_budget(rest, pdbs_served, ns, matching[0], pod)
        rest.delete(pods, ns, name, options, manager=manager)
    return status_object(201, "", "")


def _check_budget(rest: Rest, pdbs: ServedResource, ns: str, pdb: JsonDict, pod: JsonDict) -> None:
    spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
    name = pdb["metadata"]["name"]
    too_many = "Cannot evict pod as it would violate the pod's disruption budget."
    ready = _pod_ready(pod)
    if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        if not ready:
            return
    elif (
        not ready
        and int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0)
        and int(status.get("desiredHealthy") or 0) > 0
    ):
        return  # IfHealthyBudget: an unhealthy pod goes while the budget is healthy
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        raise StatusError(
            429,
            "TooManyRequests",
            too_many,
            {
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {name} is still being processed by "
                        "the server.",
                    }
                ],
                "retryAfterSeconds": 10,
            },
            headers={"Retry-After": "10"},
        )
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise StatusError(
            403,
            "Forbidden",
            f'poddisruptionbudgets.policy "{name}" is forbidden: '
            "pdb disruptions allowed is negative",
            {"name": name, "group": "policy", "kind": "poddisruptionbudgets"},
        )
    if allowed == 0:
        desired, current = (
            int(status.get("desiredHealthy") or 0),
            int(status.get("currentHealthy") or 0),
        )
        raise StatusError(
            429,
            "TooManyRequests",
            too_many,
            {
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {name} needs {desired} healthy pods "
                        f"and has {current} currently",
                    }
                ]
            },
        )
    new = copy.deepcopy(pdb)
    new_status = new.setdefault("status", {})
    new_status["disruptionsAllowed"] = allowed - 1
    new_status.setdefault("disruptedPods", {})[pod["metadata"]["name"]] = _ts(_now())
    rest.update(pdbs, ns, name, new, subresource="status", manager="kube-apiserver")


def pod_log(pod: JsonDict, query: dict[str, str]) -> str:
    """The text of ``pods/log`` for a pod no kubelet runs.

    Raises:
        StatusError: 400 for a container the pod lacks (or none named when several), and
            for a pod on a node, whose containers never start here.
    """
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    containers = [c.get("name") for c in spec.get("containers") or []]
    others = [
        c.get("name")
        for key in ("initContainers", "ephemeralContainers")
        for c in spec.get(key) or []
    ]
    container = query.get("container", "")
    if not container:
        if len(containers) == 1:
            container = str(containers[0])
        else:
            choices = " ".join(str(c) for c in containers)
            message = (
                f"a container name must be specified for pod {name}, choose one of: [{choices}]"
            )
            if others:
                message += f" or one of the init containers: [{' '.join(map(str, others))}]"
            raise StatusError(400, "BadRequest", message)
    elif container not in containers and container not in others:
        raise StatusError(400, "BadRequest", f"container {container} is not valid for pod {name}")
    if not spec.get("nodeName"):
        return ""  # kube: no host assigned, no stream (the caller answers 204)
    raise StatusError(
        400,
        "BadRequest",
        f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
    )


# --- service account tokens ------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token_request(
    rest: Rest,
    sas: ServedResource,
    ns: str,
    name: str,
    request: Any,
    *,
    authenticator: Authenticator | None = None,
) -> JsonDict:
    """``serviceaccounts/token``: a TokenRequest answered with a token and its expiry,
    which ``authenticator`` will accept from then on."""
    request = _body(request, "TokenRequest")
    sa = rest.get(sas, ns, name)
    spec = dict(request.get("spec") or {})
    seconds = spec.get("expirationSeconds", 3600)
    if not isinstance(seconds, int) or seconds < 600:
        raise _invalid(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            field="spec.expirationSeconds",
            value=seconds,
            detail="may not specify a duration less than 10 minutes",
        )
    if seconds > 2**32:
        raise _invalid(
            "TokenRequest",
            "authentication.k8s.io",
            name,
            field="spec.expirationSeconds",
            value=seconds,
            detail="may not specify a duration larger than 2^32 seconds",
        )
    audiences = list(spec.get("audiences") or [ISSUER])
    now = _now().replace(microsecond=0)
    expires = now + dt.timedelta(seconds=seconds)
    claims: JsonDict = {
        "aud": audiences,
        "exp": int(expires.timestamp()),
        "iat": int(now.timestamp()),
        "iss": ISSUER,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": {
            "namespace": ns,
            "serviceaccount": {"name": name, "uid": sa["metadata"]["uid"]},
        },
        "nbf": int(now.timestamp()),
        "sub": f"system:serviceaccount:{ns}:{name}",
    }
    bound = spec.get("boundObjectRef")
    if isinstance(bound, dict) and bound.get("kind"):
        claims["kubernetes.io"][str(bound["kind"]).lower()] = {
            "name": bound.get("name", ""),
            "uid": bound.get("uid", ""),
        }
    header = {"alg": "RS256", "kid": "overseer-local"}
    token = ".".join(
        (
            _b64url(orjson.dumps(header)),
            _b64url(orjson.dumps(claims)),
            _b64url(secrets.token_bytes(256)),
        )
    )
    if authenticator is not None:
        authenticator.issued(
            token,
            IssuedToken(
                ns, name, str(sa["metadata"]["uid"]), expires.timestamp(), tuple(audiences)
            ),
        )
    spec["audiences"] = audiences
    spec["expirationSeconds"] = seconds
    spec.setdefault("boundObjectRef", None)
    return {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": None},
        "spec": spec,
        "status": {"token": token, "expirationTimestamp": _ts(expires)},
    }


# --- create-only kinds -----------------------------------------------------------------


def create_only(
    rest: Rest,
    registry: ResourceRegistry,
    served: ServedResource,
    ns: str | None,
    body: Any,
    *,
    user: UserInfo = ANONYMOUS,
    authorizer: RbacAuthorizer | None = None,
    authenticator: Authenticator | None = None,
) -> tuple[int, JsonDict]:
    """A POST to a resource that stores nothing: bindings and the reviews.

    ``user`` is who asks; ``authorizer`` the server's RBAC when it enforces it (None:
    every request is allowed, and the access reviews say so); ``authenticator`` answers
    TokenReviews (None: no token is valid).
    """
    kind = served.resource.kind
    obj = _body(body, kind)
    if kind == "Binding":
        pods = registry.lookup("", "v1", "pods")
        assert pods is not None and ns is not None
        return 201, bind(rest, pods, ns, obj)
    out = copy.deepcopy(obj)
    out["apiVersion"] = served.resource.api_version
    out["kind"] = kind
    meta = out.setdefault("metadata", {})
    meta.setdefault("creationTimestamp", None)
    if ns is not None:
        meta["namespace"] = ns
    spec = out.get("spec") or {}
    if kind in ("SelfSubjectAccessReview", "SubjectAccessReview", "LocalSubjectAccessReview"):
        out["status"] = _access_review(kind, spec, ns, user, authorizer)
    elif kind == "SelfSubjectRulesReview":
        if authorizer is None:
            out["status"] = {
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
            }
        else:
            out["status"] = authorizer.rules_for(user, str(spec.get("namespace") or ""))
    elif kind == "SelfSubjectReview":
        out["status"] = {"userInfo": user.to_json()}
    elif kind == "TokenReview":
        audiences = [str(a) for a in spec.get("audiences") or []]
        reviewed = (
            authenticator.lookup(str(spec.get("token") or ""), audiences)
            if authenticator is not None
            else None
        )
        out["status"] = (
            {"authenticated": True, "user": reviewed.to_json(), "audiences": audiences or [ISSUER]}
            if reviewed is not None
            else {"user": {}, "error": "[invalid bearer token, token lookup failed]"}
        )
    return 201, out


def _access_review(
    kind: str,
    spec: JsonDict,
    ns: str | None,
    requester: UserInfo,
    authorizer: RbacAuthorizer | None,
) -> JsonDict:
    """The ``status`` of a (Local/Self)SubjectAccessReview: what the authorizer decides
    for the user and attributes the review names."""
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if bool(resource) == bool(non_resource):
        raise StatusError(
            422,
            "Invalid",
            f'{kind}.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
            'Invalid value: "null": exactly one of nonResourceAttributes or '
            "resourceAttributes must be specified",
        )
    if kind == "SelfSubjectAccessReview":
        user = requester
    else:
        name = str(spec.get("user") or "")
        groups = tuple(str(g) for g in spec.get("groups") or [])
        if not name and not groups:
            raise StatusError(
                422,
                "Invalid",
                f'{kind}.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": '
                "at least one of user or group must be specified",
            )
        user = UserInfo(name, str(spec.get("uid") or ""), groups)
    if resource:
        namespace = str(resource.get("namespace") or "")
        if kind == "LocalSubjectAccessReview" and namespace != ns:
            raise StatusError(
                400,
                "BadRequest",
                f"spec.resourceAttributes.namespace must match namespace: {ns}",
            )
        attrs = Attributes(
            user,
            str(resource.get("verb") or ""),
            True,
            namespace=namespace,
            api_group=str(resource.get("group") or ""),
            resource=str(resource.get("resource") or ""),
            subresource=str(resource.get("subresource") or ""),
            name=str(resource.get("name") or ""),
        )
    else:
        assert isinstance(non_resource, dict)
        attrs = Attributes(
            user,
            str(non_resource.get("verb") or ""),
            False,
            path=str(non_resource.get("path") or ""),
        )
    if authorizer is None:
        return {"allowed": True}
    decision = authorizer.authorize(attrs)
    status: JsonDict = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return status


# --- APIServices -----------------------------------------------------------------------


def apiservice_status(obj: JsonDict) -> JsonDict:
    """What kube-aggregator's availability controller writes for an APIService."""
    service = (obj.get("spec") or {}).get("service")
    now = _ts(_now())
    if not service:
        condition = {
            "type": "Available",
            "status": "True",
            "lastTransitionTime": now,
            "reason": "Local",
            "message": "Local APIServices are always available",
        }
    else:
        condition = {
            "type": "Available",
            "status": "False",
            "lastTransitionTime": now,
            "reason": "ServiceNotFound",
            "message": f'service/{service.get("name", "")} in "{service.get("namespace", "")}" '
            "is not present",
        }
    return {"conditions": [condition]}


# groupPriorityMinimum, versionPriority of kube-apiserver's automanaged APIServices.
_PRIORITIES: Final = {
    "": (18000, 1),
    "apps": (17800, 15),
    "events.k8s.io": (17750, 15),
    "authentication.k8s.io": (17700, 15),
    "authorization.k8s.io": (17600, 15),
    "autoscaling": (17500, 30),
    "batch": (17400, 15),
    "certificates.k8s.io": (17300, 15),
    "networking.k8s.io": (17200, 15),
    "policy": (17100, 15),
    "rbac.authorization.k8s.io": (17000, 15),
    "storage.k8s.io": (16800, 15),
    "apiextensions.k8s.io": (16700, 15),
    "admissionregistration.k8s.io": (16700, 15),
    "scheduling.k8s.io": (16600, 15),
    "coordination.k8s.io": (16500, 15),
    "node.k8s.io": (16300, 15),
    "discovery.k8s.io": (16200, 15),
    "resource.k8s.io": (16200, 15),
    "flowcontrol.apiserver.k8s.io": (16100, 21),
    "apiregistration.k8s.io": (18000, 15),
}


def bootstrap_apiservices(rest: Rest, registry: ResourceRegistry) -> None:
    """The APIService every built-in group-version has (``automanaged: onstart``)."""
    served = registry.lookup("apiregistration.k8s.io", "v1", "apiservices")
    assert served is not None
    versions = {(s.resource.group, s.resource.version) for s in registry if not s.custom}
    for group, version in sorted(versions):
        minimum, priority = _PRIORITIES.get(group, (16000, 15))
        if (group, version) == ("autoscaling", "v1"):
            priority = 15  # v2 (30) is preferred
        name = f"{version}.{group}"  # "v1." for the core group
        body = {
            "metadata": {
                "name": name,
                "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"},
            },
            "spec": {
                "group": group,
                "version": version,
                "groupPriorityMinimum": minimum,
                "versionPriority": priority,
            },
        }
        if not group:
            del body["spec"]["group"]  # type: ignore[attr-defined]
        rest.create(served, None, body, manager="kube-apiserver")


# --- dispatch --------------------------------------------------------------------------


def handle(
    rest: Rest,
    registry: ResourceRegistry,
    verb: str,
    served: ServedResource,
    ns: str | None,
    *,
    name: str,
    subresource: str,
    body: Any,
    raw: bytes,
    content_type: str,
    query: dict[str, str],
    manager: str,
    dry_run: bool,
    authenticator: Authenticator | None = None,
) -> tuple[int, Any]:
    """Serve ``{plural}/{name}/{subresource}`` for the subresources of this module
    (``authenticator`` learns the service-account tokens issued).

    Returns ``(status, body)``; a ``str`` body is plain text (pods/log).
    """
    not_allowed = StatusError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )
    if subresource == "scale":
        if verb == "get":
            return 200, scale_of(served, rest.get(served, ns, name))
        if verb == "update":
            return 200, _put_scale(rest, served, ns, name, body, manager=manager, dry_run=dry_run)
        if verb == "patch":
            return 200, _patch_scale(
                rest,
                served,
                ns,
                name,
                body=raw,
                content_type=content_type,
                manager=manager,
                dry_run=dry_run,
            )
        raise not_allowed
    if subresource == "binding":
        if verb != "create":
            raise not_allowed
        assert ns is not None
        return 201, bind(rest, served, ns, body, name=name)
    if subresource == "eviction":
        if verb != "create":
            raise not_allowed
        assert ns is not None
        return 201, evict(rest, registry, served, ns, name, eviction=body, manager=manager)
    if subresource == "log":
        if verb != "get":
            raise not_allowed
        text = pod_log(rest.get(served, ns, name), query)
        return (200 if text else 204), text
    if subresource == "token":
        if verb != "create":
            raise not_allowed
        assert ns is not None
        return 201, token_request(rest, served, ns, name, body, authenticator=authenticator)
    raise StatusError(404, "NotFound", "the server could not find the requested resource", {})
