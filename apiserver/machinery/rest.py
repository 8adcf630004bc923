"""The verbs of the local API server: what a create, update, patch or delete does.

This is the part of kube-apiserver between the HTTP handler and etcd: the request
options' validation, the decoder's view of a body (:meth:`Rest.decode_write`:
``fieldValidation``, wrong JSON types), the field manager (``managedFields``, server-side
apply: :mod:`.managedfields`), the generic registry store and each resource's strategy.
It encodes nothing (``server.py`` does HTTP); it answers plain dicts or raises
:class:`StatusError`, which the HTTP layer renders as a ``Status`` object.

Behaviour follows kube-apiserver 1.36 as DESIGN.md §5 records it: global monotonic
resourceVersion, optimistic concurrency, generateName, uid/creationTimestamp/generation,
status subresource split, finalizers and deletionTimestamp, DELETE answers per resource,
no-op updates that do not bump the resourceVersion, list options and reads at a future
resourceVersion, graceful pod deletion, Service IP and node port allocation.

Admission runs where kube-apiserver runs it: the built-in plugins' defaulting, then the
mutating admission webhooks, then validation, then ValidatingAdmissionPolicies and the
validating admission webhooks, then ResourceQuota. Custom resources of a CRD whose
conversion strategy is ``Webhook`` are stored at the CRD's storage version and served at
the version asked for through the conversion webhook.

Thread-safe: every read-modify-write holds the storage lock, except while a webhook is
called: a verb that took the lock itself releases it around the call (kube holds no lock
while it calls webhooks, and a webhook may call the API server back), then checks that
what it read is unchanged, else starts over (as kube's ``GuaranteedUpdate`` does). A verb
called with the lock already held (the server's own controllers) keeps it.
"""

from __future__ import annotations

import base64
import builtins
import copy
import dataclasses
import datetime as dt
import itertools
import random
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from apiserver.api.errors import StatusError, status_object
from apiserver.api.field import AdmissionError, Cause, FieldError, not_supported, str_list
from apiserver.api.field import invalid as invalid_field
from apiserver.api.gofmt import go_json, go_v, quote
from apiserver.api.resources import Generation, ResourceRegistry, ServedResource
from apiserver.machinery import (
    fieldvalidation,
    managedfields,
    negotiation,
    patch,
    rootca,
    schema,
    typeinfo,
)
from apiserver.machinery.admission import (
    Attributes,
    ConversionFailed,
    Converter,
    MutatingAdmission,
    QuotaAdmission,
    Refused,
    Reinvocation,
    ServiceIPs,
    Strategy,
    ValidatingAdmission,
    WebhookAdmission,
)
from apiserver.machinery.fieldvalidation import Directive
from apiserver.storage.selectors import FieldSelector, object_fields
from apiserver.storage.shardselector import ShardSelector, ShardSelectorError, parse_shard_selector
from apiserver.storage.store import ObjectKey, Storage, TooOldResourceVersion, copy_json
from manager.labels import LabelSelector

__all__ = [
    "DeleteOptions",
    "ListOptions",
    "Rest",
    "StatusError",
    "check_write_options",
    "status_object",
]

JsonDict = dict[str, Any]

CRD_CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_UID_RANDOM = random.Random()  # seeded from os.urandom once


def new_uid() -> str:
    """A random (version 4) UUID as kube's ``uuid.NewUUID`` gives. Not from
    ``uuid.uuid4()``: its ``os.urandom`` per call was a fifth of a create's time, and
    a uid is unique, not secret."""
    n = _UID_RANDOM.getrandbits(128)
    n = (n & ~(0xC000 << 48)) | (0x8000 << 48)  # RFC 4122 variant
    n = (n & ~(0xF000 << 64)) | (4 << 76)  # version 4
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# etcd3's answer to a continue token whose revision is compacted away (errors.go).
INCONSISTENT_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You "
    "can start a new list without the continue parameter, or use the continue token in "
    "this response to retrieve the remainder of the results. Continuing with the provided "
    "token results in an inconsistent list - objects that were created, modified, or "
    "deleted between the time the first chunk was returned and now may show up in the list."
)

_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _details(served: ServedResource, name: str, **extra: Any) -> JsonDict:
    d: JsonDict = {"name": name}
    if served.resource.group:
        d["group"] = served.resource.group
    d["kind"] = served.resource.plural
    d.update(extra)
    return d


def not_found(served: ServedResource, name: str) -> StatusError:
    gr = served.resource.group_resource
    return StatusError(404, "NotFound", f'{gr} "{name}" not found', _details(served, name))


def _summary(data: bytes, limit: int = 30) -> str:
    """handlers/rest.go ``summarizeData``: a JSON object's start, anything else in hex."""
    if not data:
        return "<empty>"
    cut, more = data[:limit], " ..." if len(data) > limit else ""
    if data[:1] == b"{":
        return cut.decode(errors="replace") + more
    return cut.hex() + more


def _check_custom_type(kind: str, api_version: str, obj: JsonDict, body: bytes) -> None:
    """A custom resource's body is read by the unstructured decoder, which needs the
    body's own ``kind`` and ``apiVersion`` (a built-in's codec takes them from the URL):
    without a kind ``transformDecodeError`` refuses it, quoting the body; without an
    apiVersion the create or update handler does.

    Raises:
        StatusError: 400 BadRequest.
    """
    if not obj.get("kind"):
        raw = body.decode(errors="replace")
        raise _bad_request(
            f"the object provided is unrecognized (must be of type {kind}): "
            f"Object 'Kind' is missing in '{raw}' ({_summary(body)})"
        )
    if not obj.get("apiVersion"):
        raise _bad_request(
            "the API version in the data () does not match the expected API version "
            f"({api_version})"
        )


def _bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def _strict_refusal(directive: Directive, refused: str) -> StatusError:
    """A Strict ``fieldValidation`` refusal: the decoder's 400 for a create or update
    body; for a patch, handlers/patch.go's ``NewInvalid(GroupKind{}, "",
    field.Invalid("patch", <value>, <strict decoding error>))``, a 422."""
    if directive.patch_value is None:
        return _bad_request(refused)
    return _patch_invalid(directive.patch_value, refused)


def _patch_invalid(value: str, detail: str) -> StatusError:
    """patch.go's refusal of a patched object: a 422 on the field ``patch``."""
    body = f"Invalid value: {value}: {detail}"
    cause = {"reason": "FieldValueInvalid", "message": body, "field": "patch"}
    return StatusError(422, "Invalid", f' "" is invalid: patch: {body}', {"causes": [cause]})


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Stale(StatusError):
    """An update's resourceVersion is not the stored one (409 Conflict)."""


class _Changed(Exception):
    """What a verb read changed while the storage lock was released: start over."""


def _held(lock: Any) -> bool:
    """Whether this thread holds the storage lock (an RLock). ``threading.Condition``
    asks the same ``_is_owned``."""
    return bool(lock._is_owned())


def _pins_resource_version(kind: str, doc: Any) -> bool:
    """Whether a patch names a resourceVersion (a precondition: no retry on conflict)."""
    if kind == "json":
        return isinstance(doc, list) and any(
            isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" for op in doc
        )
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return isinstance(meta, dict) and bool(meta.get("resourceVersion"))


def _with_obj(attrs: Attributes, obj: JsonDict | None) -> Attributes:
    """``attrs`` of another object (the constructor: ``dataclasses.replace`` costs more)."""
    return Attributes(
        attrs.operation,
        attrs.group,
        attrs.version,
        attrs.resource,
        attrs.kind,
        attrs.subresource,
        attrs.namespace,
        attrs.name,
        obj,
        attrs.old,
        attrs.dry_run,
        attrs.options,
    )


def _options(kind: str, dry_run: bool) -> JsonDict:
    """The request's options as admission webhooks are sent them."""
    out: JsonDict = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    if dry_run:
        out["dryRun"] = ["All"]
    return out


_RETRIES: Final = 32  # starting over after a concurrent write (GuaranteedUpdate retries too)


_OPTIONS_KIND: Final = {
    "create": "CreateOptions",
    "update": "UpdateOptions",
    "patch": "PatchOptions",
    "delete": "DeleteOptions",
    "deletecollection": "DeleteOptions",
}
_FIELD_VALIDATION: Final = ("", "Ignore", "Strict", "Warn")
# Kinds whose stored object carries admission-plugin or allocator fields the creator
# does not own (pods: service account, token volume, tolerations; services: cluster IP).
_PLUGIN_DEFAULTED: Final = frozenset({("Pod", ""), ("Service", "")})


def _go_quote(text: str) -> str:
    return orjson.dumps(text).decode()


def check_write_options(verb: str, query: dict[str, str], dry_run: list[str], ctype: str) -> None:
    """``ValidateCreateOptions`` & co.: 422 for a bad ``dryRun``, ``fieldValidation``,
    ``fieldManager`` (required for apply, at most 128 printable characters) or ``force``
    on a non-apply patch."""
    kind = _OPTIONS_KIND.get(verb)
    if kind is None:
        return
    causes: list[tuple[str, str, str]] = []  # (reason, field, message)
    apply = ctype.split(";", maxsplit=1)[0].strip().lower() == "application/apply-patch+yaml"
    manager = query.get("fieldManager", "")
    if verb == "patch":
        if not apply and "force" in query:
            causes.append(
                (
                    "FieldValueForbidden",
                    "force",
                    "Forbidden: may not be specified for non-apply patch",
                )
            )
        if apply and not manager:
            causes.append(
                (
                    "FieldValueRequired",
                    "fieldManager",
                    "Required value: is required for apply patch",
                )
            )
    if verb not in {"delete", "deletecollection"}:
        if len(manager) > 128:
            causes.append(
                ("FieldValueTooLong", "fieldManager", "Too long: may not be more than 128 bytes")
            )
        for i, ch in enumerate(manager):
            if not ch.isprintable():
                causes.append(
                    (
                        "FieldValueInvalid",
                        "fieldManager",
                        f"Invalid value: {_go_quote(manager)}: invalid character "
                        f"U+{ord(ch):04X} (at position {i})",
                    )
                )
    bad = [d for d in dry_run if d != "All"]
    if bad:
        shown = str_list(list(dry_run)).text
        causes.append(
            (
                "FieldValueNotSupported",
                "dryRun",
                f'Unsupported value: {shown}: supported values: "All"',
            )
        )
    validation = query.get("fieldValidation", "")
    if verb not in ("delete", "deletecollection") and validation not in _FIELD_VALIDATION:
        supported = ", ".join(_go_quote(v) for v in _FIELD_VALIDATION)
        causes.append(
            (
                "FieldValueNotSupported",
                "fieldValidation",
                f"Unsupported value: {_go_quote(validation)}: supported values: {supported}",
            )
        )
    if causes:
        raise _options_invalid(kind, causes)


@dataclass(frozen=True, slots=True)
class ListOptions:
    """The query of a LIST (or the start of a WATCH)."""

    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    shard_selector: str = ""  # honoured only with the ShardedListAndWatch gate


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    """A ``DeleteOptions`` body merged with the query parameters."""

    propagation_policy: str = ""
    orphan_dependents: bool | None = None
    preconditions: JsonDict = field(default_factory=dict)
    grace_period_seconds: int | None = None
    dry_run: bool = False


def _delete_options_object(options: DeleteOptions) -> JsonDict:
    """The DeleteOptions admission webhooks are sent."""
    out = _options("DeleteOptions", options.dry_run)
    if options.grace_period_seconds is not None:
        out["gracePeriodSeconds"] = options.grace_period_seconds
    if options.preconditions:
        out["preconditions"] = dict(options.preconditions)
    if options.orphan_dependents is not None:
        out["orphanDependents"] = options.orphan_dependents
    if options.propagation_policy:
        out["propagationPolicy"] = options.propagation_policy
    return out


def _invalid_delete_options(options: DeleteOptions) -> StatusError | None:
    """``ValidateDeleteOptions`` (apimachinery's meta/v1 validation) as the delete handler
    answers it: ``NewInvalid`` of ``DeleteOptions.meta.k8s.io`` with no name."""
    errs: list[FieldError] = []
    policy = options.propagation_policy
    if options.orphan_dependents is not None and policy:
        errs.append(
            invalid_field(
                "propagationPolicy",
                policy,
                "orphanDependents and deletionPropagation cannot be both set",
            )
        )
    if policy and policy not in ("Foreground", "Background", "Orphan"):
        errs.append(
            not_supported(
                "propagationPolicy", policy, ["Foreground", "Background", "Orphan", "nil"]
            )
        )
    if not errs:
        return None
    exc = AdmissionError("DeleteOptions", "meta.k8s.io", "", [e.cause() for e in errs])
    details: JsonDict = {"group": "meta.k8s.io", "kind": "DeleteOptions"}
    details["causes"] = [
        {"reason": c.reason, "message": c.message, "field": c.field} for c in exc.causes
    ]
    return StatusError(422, "Invalid", exc.message, details)


# ObjectMeta's maps and lists that Go's JSON omits when empty (``omitempty``)
_OMITTED_WHEN_EMPTY: Final = ("labels", "annotations", "finalizers", "ownerReferences")


def _drop_empty_meta(obj: JsonDict) -> None:
    """Leave out the empty metadata maps and lists, as decoding into ObjectMeta and
    encoding it again does (custom resources' metadata goes through ObjectMeta too):
    ``annotations: {}``, or the map a patch emptied, is not in the stored object."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in _OMITTED_WHEN_EMPTY:
            if key in meta and not meta[key] and isinstance(meta[key], (dict, list)):
                del meta[key]


def _check_preconditions(served: ServedResource, pre: JsonDict, meta: JsonDict) -> None:
    """``rest.BeforeDelete``'s precondition checks: a ``NewConflict`` naming the Kind
    (``ConfigMap``, ``Deployment.apps``), not the resource."""
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        problem = (
            f"the UID in the precondition ({pre['uid']}) does not match the UID in record "
            f"({meta.get('uid')}). The object might have been deleted and then recreated"
        )
    elif pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
        problem = (
            f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not match "
            f"the ResourceVersion in record ({meta['resourceVersion']}). The object might have "
            "been modified"
        )
    else:
        return
    r = served.resource
    details: JsonDict = {"name": meta.get("name", "")}
    if r.group:
        details["group"] = r.group
    details["kind"] = r.kind
    raise StatusError(
        409,
        "Conflict",
        f"Operation cannot be fulfilled on {served.qualified_kind} "
        f'"{meta.get("name", "")}": {problem}',
        details,
    )


# kube-controller-manager's root-ca publisher (rootcacertpublisher/publisher.go)
_ROOT_CA_DESCRIPTION: Final = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)

FRESHNESS_TIMEOUT: Final = 3.0  # seconds a read at a future resourceVersion waits


def _too_large(wanted: int, current: int) -> StatusError:
    """``NewTooLargeResourceVersionError``: a 504 Timeout the client may retry."""
    return StatusError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {wanted}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def _options_invalid(kind: str, causes: list[tuple[str, str, str]]) -> StatusError:
    """A 422 on ``<kind>.meta.k8s.io ""``; causes are (reason, field, message)."""
    errors = [f"{f}: {m}" for _, f, m in causes]
    joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return StatusError(
        422,
        "Invalid",
        f'{kind}.meta.k8s.io "" is invalid: {joined}',
        {
            "group": "meta.k8s.io",
            "kind": kind,
            "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes],
        },
    )


def _check_list_options(opts: ListOptions) -> None:
    """``ValidateListOptions`` for a LIST (watches validate their own options)."""
    match = opts.resource_version_match
    if not match:
        return
    causes: list[tuple[str, str, str]] = []
    field = "resourceVersionMatch"
    if not opts.resource_version:
        causes.append(
            (
                "FieldValueForbidden",
                field,
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            )
        )
    if opts.continue_:
        causes.append(
            (
                "FieldValueForbidden",
                field,
                "Forbidden: resourceVersionMatch is forbidden when continue is provided",
            )
        )
    if match not in ("Exact", "NotOlderThan"):
        causes.append(
            (
                "FieldValueNotSupported",
                field,
                f'Unsupported value: {_go_quote(match)}: supported values: "Exact", '
                '"NotOlderThan", ""',
            )
        )
    if match == "Exact" and opts.resource_version == "0":
        causes.append(
            (
                "FieldValueForbidden",
                field,
                'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
            )
        )
    if causes:
        raise _options_invalid("ListOptions", causes)


def _requested_ips(svc: JsonDict) -> list[str]:
    """The cluster IPs a Service asks for itself (before the server allocates any)."""
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return []
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    return [str(ip) for ip in ips if ip and ip != "None"]


def _supplied_managed_fields(supplied: Any, live: list[JsonDict]) -> list[JsonDict]:
    """The managedFields an update starts from (``decodeLiveOrNew``).

    ``[]`` or ``[{}]`` resets them; entries that do not decode (an operation other than
    Apply or Update, no apiVersion, a fieldsType other than FieldsV1) or none at all
    keep the live ones; anything else replaces them.
    """
    if not isinstance(supplied, list):
        return live
    if not supplied or (len(supplied) == 1 and supplied[0] == {}):
        return []
    for e in supplied:
        if (
            not isinstance(e, dict)
            or e.get("operation") not in ("Apply", "Update")
            or not e.get("apiVersion")
            or e.get("fieldsType") != "FieldsV1"
        ):
            return live
    return [dict(e) for e in supplied]


def _as_stored(obj: JsonDict) -> JsonDict:
    return obj


def _revision(obj: JsonDict) -> int:
    """The object's ``metadata.resourceVersion`` as a number; -1 when it has none."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or -1)
    except (TypeError, ValueError):
        return -1


def _strip_for_compare(obj: JsonDict) -> JsonDict:
    meta = {
        k: v
        for k, v in (obj.get("metadata") or {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    return {**obj, "metadata": meta}


class Rest:
    """Verb semantics over :class:`Storage`, for every served resource."""

    def __init__(
        self,
        storage: Storage,
        registry: ResourceRegistry,
        *,
        strategy: Strategy,
        services: ServiceIPs,
        quota: QuotaAdmission | None = None,
        validating: Sequence[ValidatingAdmission] = (),
        mutating: MutatingAdmission | None = None,
        webhooks: WebhookAdmission | None = None,
        converter: Converter | None = None,
    ) -> None:
        """``strategy`` defaults and validates each kind, ``services`` allocates Service
        IPs and node ports, ``quota``, ``validating``, ``mutating`` (the
        MutatingAdmissionPolicy plugin) and ``webhooks`` are the admission chain,
        ``converter`` converts custom resources between versions
        (``apiserver.registry.strategy.new_rest`` wires the built-in ones)."""
        self.storage = storage
        self.registry = registry
        self.strategy = strategy
        self._services = services
        self.quota = quota
        self._validating = tuple(validating)
        self.mutating = mutating
        self.webhooks = webhooks
        self.converter = converter
        # conversions for reads: (uid, resourceVersion, apiVersion) -> served object;
        # forgotten when a CRD changes (kube's per-version watch caches are rebuilt then)
        self._conversions: dict[tuple[str, str, str], JsonDict] = {}
        self._conversions_lock = threading.Lock()
        self.on_crd_change: list[Callable[[], None]] = [self._forget_conversions]
        self._root_ca: rootca.RootCA | None = None  # made when first needed
        self._root_ca_lock = threading.Lock()
        # Where each custom resource's watch cache begins: kube's cacher lists when the
        # resource is first served, and a watch from before that list is Expired.
        self._watch_floors: dict[str, int] = {}
        self._types: dict[tuple[str, str, Any], typeinfo.TypeNode] = {}
        self.sharded_list_and_watch = False  # the ShardedListAndWatch feature gate

    # -- helpers ---------------------------------------------------------------------

    def _key(self, served: ServedResource, namespace: str | None, name: str) -> ObjectKey:
        return (served.key, namespace or "" if served.resource.namespaced else "", name)

    def _allocate_cluster_ip(self) -> str:
        return self._services.next_ip()

    @staticmethod
    def _token_suffix() -> str:
        return "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))

    def decoder(self, served: ServedResource) -> Callable[[JsonDict], JsonDict]:
        """How ``served``'s objects read from storage, as kube's storage codec decodes
        them: a custom resource pruned and defaulted by the schema of the version it is
        stored at (its CRD as it is now: a default added later shows on objects stored
        before, in every read and in the old object of every write); anything else as
        stored. The function is for one request (it holds the CRD it found); it copies
        only what it changes, so its results are read-only, like storage's objects."""
        if not served.custom:
            return _as_stored
        crd = self.storage.get(
            ("apiextensions.k8s.io/customresourcedefinitions", "", served.crd_name)
        )
        if crd is None:
            return _as_stored
        # Every write of a custom resource stores it pruned and defaulted by its CRD as it
        # was then (under the storage lock), and decoding is idempotent: an object stored
        # after the CRD's last change reads as it is stored, without a walk.
        crd_revision = _revision(crd)
        found: dict[str, Any] = {}

        def decode(obj: JsonDict) -> JsonDict:
            if _revision(obj) > crd_revision:
                return obj
            version = str(obj.get("apiVersion") or "").rpartition("/")[2]
            if version not in found:
                found[version] = schema.version_schema(crd, version) or schema.version_schema(
                    crd, served.resource.version
                )
            stored_schema = found[version]
            return obj if stored_schema is None else schema.from_storage(stored_schema, obj)

        return decode

    def _stored(self, served: ServedResource, key: ObjectKey) -> JsonDict | None:
        """The object at ``key`` as read from storage (see :meth:`decoder`), or None."""
        obj = self.storage.get(key)
        return obj if obj is None or not served.custom else self.decoder(served)(obj)

    def _render(
        self,
        served: ServedResource,
        obj: JsonDict,
        decode: Callable[[JsonDict], JsonDict] | None = None,
    ) -> JsonDict:
        """The object as served at ``served``'s version (custom resources share storage),
        decoded as storage decodes it (an answer is what the write stored, read back).
        Objects of a CRD converted by webhook are left at the version they are stored at:
        :meth:`served_form` converts them, outside the storage lock."""
        if served.custom:
            obj = (decode or self.decoder(served))(obj)
            if obj.get("apiVersion") != served.resource.api_version:
                if self._converts_by_webhook(served):
                    return obj
                obj = {**obj, "apiVersion": served.resource.api_version}
        return obj

    # -- conversion of custom resources ------------------------------------------------

    def _crd(self, served: ServedResource) -> JsonDict | None:
        return self.storage.get(
            ("apiextensions.k8s.io/customresourcedefinitions", "", served.crd_name)
        )

    def _converts_by_webhook(self, served: ServedResource) -> bool:
        if not served.custom or self.converter is None:
            return False
        crd = self._crd(served) or {}
        conversion = (crd.get("spec") or {}).get("conversion") or {}
        return conversion.get("strategy") == "Webhook"

    def _version(self, served: ServedResource, version: str) -> ServedResource:
        for other in self.registry.by_crd(served.crd_name):
            if other.resource.version == version:
                return other
        return served

    def _storage_version(self, served: ServedResource) -> ServedResource:
        """The CRD's storage version (where its objects are kept)."""
        crd = self._crd(served) or {}
        for version in (crd.get("spec") or {}).get("versions") or []:
            if version.get("storage"):
                return self._version(served, str(version.get("name")))
        return served

    def _forget_conversions(self) -> None:
        with self._conversions_lock:
            self._conversions.clear()

    def convert_to(self, served: ServedResource, objects: list[JsonDict]) -> list[JsonDict]:
        """Custom objects at ``served``'s version: by the CRD's conversion webhook, then
        defaulted and pruned by that version's schema, as kube decodes what it converted.
        What is converted of a stored revision is remembered (per uid, resourceVersion
        and version); a written object that is not stored (admission, a dry run) is not.

        Raises:
            StatusError: the conversion webhook failed (500, kube's message).
        """
        target = served.resource.api_version
        out: list[JsonDict | None] = []
        todo: list[tuple[int, JsonDict, tuple[str, str, str] | None]] = []
        for obj in objects:
            if obj.get("apiVersion") == target:
                out.append(obj)
                continue
            key = self._conversion_key(served, obj, target)
            with self._conversions_lock:
                cached = self._conversions.get(key) if key is not None else None
            if cached is not None:
                out.append(cached)
                continue
            todo.append((len(out), obj, key))
            out.append(None)
        if todo:
            if self.converter is None:
                converted = [{**o, "apiVersion": target} for _, o, _ in todo]
            else:
                try:
                    converted = self.converter.convert(
                        served.crd_name, [o for _, o, _ in todo], target
                    )
                except ConversionFailed as exc:
                    raise StatusError(500, "", str(exc)) from None
            for (i, _, key), got in zip(todo, converted, strict=True):
                obj = self._crd_defaults(served, got)
                out[i] = obj
                if key is not None:
                    with self._conversions_lock:
                        if len(self._conversions) > 8192:
                            self._conversions.clear()
                        self._conversions[key] = obj
        return [o for o in out if o is not None]

    def _conversion_key(
        self, served: ServedResource, obj: JsonDict, target: str
    ) -> tuple[str, str, str] | None:
        """Where a conversion of ``obj`` is remembered: only the revision storage holds
        (the very object: never a copy a write is working on) is."""
        meta = obj.get("metadata") or {}
        uid, rv = str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")
        if not uid or not rv:
            return None
        stored = self.storage.get(
            self._key(served, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        )
        if stored is not obj:
            return None
        return (uid, rv, target)

    def served_form(self, served: ServedResource, obj: JsonDict) -> JsonDict:
        """``obj`` as read from storage (decoded: :meth:`decoder`, :meth:`_render`) at the
        version ``served`` serves."""
        if not served.custom or obj.get("apiVersion") == served.resource.api_version:
            return obj
        if not self._converts_by_webhook(served):
            return {**obj, "apiVersion": served.resource.api_version}
        return self.convert_to(served, [obj])[0]

    def _served_list(self, served: ServedResource, listed: JsonDict) -> JsonDict:
        items = listed.get("items") or []
        if not served.custom or all(
            i.get("apiVersion") == served.resource.api_version for i in items
        ):
            return listed
        return {**listed, "items": self.convert_to(served, items)}

    def _stored_form(self, served: ServedResource, obj: JsonDict, outermost: bool) -> JsonDict:
        """A custom object written at ``served``'s version, at the storage version when
        its CRD converts by webhook (the lock released for the call)."""
        if not self._converts_by_webhook(served):
            return obj
        storage = self._storage_version(served)
        if storage.resource.version == served.resource.version:
            return obj
        with self._unlocked(outermost):
            return self.convert_to(storage, [obj])[0]

    def _crd_defaults(
        self, served: ServedResource, obj: JsonDict, directive: Directive | None = None
    ) -> JsonDict:
        """A custom object defaulted and pruned by its version's schema (what kube's
        decoder does), its validation left for later."""
        crd = self._crd(served)
        found = schema.version_schema(crd, served.resource.version) if crd is not None else None
        if found is None:
            return obj
        pruned: list[str] = []
        result, _ = schema.apply_schema(
            found,
            obj,
            kind=served.resource.kind,
            status_subresource=served.resource.has_status,
            pruned=pruned,
        )
        if directive is not None:
            directive.add_sorted_unknown([*directive.pending, *pruned])
            directive.pending = []
            refused = directive.finish()
            if refused is not None:
                raise _strict_refusal(directive, refused)
        return dict(result)

    # -- admission around webhooks -----------------------------------------------------

    @contextmanager
    def _unlocked(self, outermost: bool) -> Iterator[None]:
        """The storage lock released for a webhook call, when the verb took it itself."""
        if not outermost:
            yield
            return
        self.storage.lock.release()
        try:
            yield
        finally:
            self.storage.lock.acquire()

    def _attributes(
        self,
        served: ServedResource,
        operation: str,
        namespace: str | None,
        obj: JsonDict | None,
        old: JsonDict | None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        name: str | None = None,
    ) -> Attributes:
        r = served.resource
        meta = (obj or old or {}).get("metadata") or {}
        kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(
            operation, "DeleteOptions"
        )
        name = str(meta.get("name") or "") if name is None else name
        if r.namespaced:
            namespace = namespace or ""
        elif (r.group, r.plural) == ("", "namespaces") and operation != "CREATE":
            namespace = name  # RequestInfo: a namespace's path names it as its own
        else:
            namespace = ""
        return Attributes(
            operation=operation,
            group=r.group,
            version=r.version,
            resource=r.plural,
            kind=r.kind,
            subresource=subresource or "",
            namespace=namespace,
            name=name,
            obj=obj,
            old=old,
            dry_run=dry_run,
            options=_options(kind, dry_run),
        )

    def _decoder(
        self, served: ServedResource, old: JsonDict | None
    ) -> Callable[[JsonDict], JsonDict]:
        """What kube's decoder makes of an object a mutating admission plugin changed
        (a webhook's patch, a MutatingAdmissionPolicy's mutation): a built-in one without
        unknown fields, its quantities canonical (a wrong type is a 500),
        scheme-defaulted; a custom one pruned and defaulted."""
        r = served.resource

        def decode(obj: JsonDict) -> JsonDict:
            if served.custom:
                return self._crd_defaults(served, {**obj, "apiVersion": r.api_version})
            t = self._type(served)
            if t is not None:
                try:
                    obj = dict(fieldvalidation.check_typed(obj, t, issues=None, unknown=[]))
                except fieldvalidation.TypeError_ as exc:
                    raise StatusError(
                        500,
                        "InternalError",
                        f"Internal error occurred: {exc}",
                        {"causes": [{"message": str(exc)}]},
                    ) from None
            obj = {**obj, "apiVersion": r.api_version, "kind": r.kind}
            if self.strategy.defaults(r.kind, r.group):
                obj = self.strategy.default(
                    r.kind,
                    r.group,
                    obj,
                    allocate_cluster_ip=self._allocate_cluster_ip,
                    token_volume_suffix=self._token_suffix,
                    old=old,
                    plugins=False,
                )
            return obj

        return decode

    def _mutate(
        self,
        served: ServedResource,
        obj: JsonDict,
        old: JsonDict | None,
        directive: Directive | None,
        *,
        attrs: Attributes,
        outermost: bool,
    ) -> tuple[JsonDict, JsonDict | None]:
        """The built-in admission plugins' defaulting, then the mutating chain in kube's
        plugin order: the MutatingAdmissionPolicies (the lock held), then the mutating
        webhooks (the lock released); then both once more, each as its reinvocation
        state allows, when either changed the object (admission/reinvocation.go: a
        webhook's change brings IfNeeded policies back, and their changes in that
        second pass the IfNeeded webhooks). Returns the object and, when a policy or
        webhook applies, the object they were given (what the field manager attributes
        to the writer); ``(obj, None)`` when none applies (validation does the
        defaulting)."""
        policies = self.mutating
        if policies is not None and (attrs.subresource or not policies.wants(attrs)):
            policies = None  # (kube's plugin mutates subresources: not here)
        webhooks = self.webhooks
        if webhooks is not None and not webhooks.wants(attrs, mutating=True):
            webhooks = None
        if policies is None and webhooks is None:
            return obj, None
        r = served.resource
        _drop_empty_meta(obj)
        try:
            if served.custom:
                obj = self._crd_defaults(served, obj, directive)
            else:
                service = r.kind == "Service" and not r.group
                if old is not None and service:
                    obj = self.strategy.prepare_update(r.kind, r.group, old, obj)
                if self.strategy.defaults(r.kind, r.group):
                    obj = self.strategy.default(
                        r.kind,
                        r.group,
                        obj,
                        allocate_cluster_ip=self._allocate_cluster_ip,
                        token_volume_suffix=self._token_suffix,
                        old=old,
                        plugins=not service,  # a Service's IPs come after admission
                    )
        except AdmissionError as exc:
            raise self._invalid(served, exc, obj) from None
        given = obj
        by_policies, by_webhooks = Reinvocation(), Reinvocation()  # the chain's context
        decode = self._decoder(served, old)  # what each mutation leaves, decoded again
        schema_type = self._type(served) if policies is not None else None
        for reinvoke in (False, True):
            if policies is not None:
                obj = policies.round(
                    _with_obj(attrs, obj),
                    decode,
                    schema_type,
                    by_policies,
                    reinvoke=reinvoke,
                )
            if webhooks is not None:
                with self._unlocked(outermost):
                    mutated = webhooks.round(
                        _with_obj(attrs, obj), decode, by_webhooks, reinvoke=reinvoke
                    )
                obj = mutated if mutated is not None else obj
            if not (by_policies.should_reinvoke or by_webhooks.should_reinvoke):
                break
        return obj, given

    def _validate_by_webhooks(self, attrs: Attributes, outermost: bool) -> bool:
        """Call the validating webhooks that apply (the lock released); whether any did."""
        if self.webhooks is None or not self.webhooks.wants(attrs, mutating=False):
            return False
        with self._unlocked(outermost):
            self.webhooks.validate(attrs)
        return True

    def _read_form(
        self, served: ServedResource, key: ObjectKey, current: JsonDict, outermost: bool
    ) -> JsonDict:
        """A stored custom object, decoded (:meth:`decoder`), at ``served``'s version, for
        a write to work on (by webhook: the lock released, then the object checked
        unchanged)."""
        if not self._converts_by_webhook(served):
            return self.served_form(served, current)
        with self._unlocked(outermost):
            converted = self.served_form(served, current)
        self._unchanged(key, current)
        return converted

    def _unchanged(self, key: ObjectKey, current: JsonDict) -> None:
        """Raise :class:`_Changed` if the stored object is no longer ``current``."""
        now = self.storage.get(key)
        if now is None or now["metadata"].get("resourceVersion") != current["metadata"].get(
            "resourceVersion"
        ):
            raise _Changed

    def _check_namespace(
        self, served: ServedResource, namespace: str | None, *, creating: bool, name: str = ""
    ) -> None:
        if not served.resource.namespaced:
            return
        if not namespace:
            raise _bad_request("the server could not find the requested resource")
        ns = self.storage.get(("/namespaces", "", namespace))
        if ns is None:
            raise StatusError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                {"name": namespace, "kind": "namespaces"},
            )
        if creating and (ns.get("metadata") or {}).get("deletionTimestamp"):
            # NamespaceLifecycle admission: admission.NewForbidden names the object (its
            # generateName before a name is generated, else "Unknown") and the resource.
            raise StatusError(
                403,
                "Forbidden",
                f'{served.resource.group_resource} "{name}" is forbidden: unable to create new '
                f"content in namespace {namespace} because it is being terminated",
                _details(
                    served,
                    name,
                    causes=[
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                ),
            )

    def _check_body_type(self, served: ServedResource, body: Any) -> JsonDict:
        if not isinstance(body, dict):
            raise _bad_request(
                "the body of the request was in an unknown format: expected an object"
            )
        r = served.resource
        api_version = body.get("apiVersion")
        kind = body.get("kind")
        if kind is not None and kind != r.kind:
            raise _bad_request(
                f"the object provided is unrecognized (must be of type {r.kind}): "
                f"kind {kind!r} does not match the URL"
            )
        if api_version is not None:
            versions = served.served_versions or (r.version,)
            group, _, version = str(api_version).rpartition("/")
            if group != r.group or version not in versions:
                raise _bad_request(
                    f"the API version in the data ({api_version}) does not match the expected "
                    f"API version ({r.api_version})"
                )
        meta = body.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            raise _bad_request("metadata: expected an object")
        return body

    def _admit(
        self,
        served: ServedResource,
        obj: JsonDict,
        old: JsonDict | None,
        directive: Directive | None = None,
    ) -> JsonDict:
        r = served.resource
        _drop_empty_meta(obj)
        try:
            if served.custom:
                self.strategy.validate(r.kind, r.group, obj, old)
                return self._apply_crd_schema(served, obj, directive)
            if r.kind == "CustomResourceDefinition":
                self._check_crd_schemas(obj)
            service = r.kind == "Service" and not r.group
            if old is not None and service:
                obj = self.strategy.prepare_update(r.kind, r.group, old, obj)
            requested = _requested_ips(obj) if service else []
            kind_group = (r.kind, r.group)
            if self.strategy.defaults(*kind_group):
                obj = self.strategy.default(
                    r.kind,
                    r.group,
                    obj,
                    allocate_cluster_ip=self._allocate_cluster_ip,
                    token_volume_suffix=self._token_suffix,
                    old=old,
                )
            self.strategy.validate(r.kind, r.group, obj, old)
            if service:
                self._services.admit(obj, old, requested)
        except AdmissionError as exc:
            raise self._invalid(served, exc, obj) from None
        return obj

    def _check_policies(self, attrs: Attributes) -> None:
        """ValidatingAdmissionPolicy admission of one write (after defaulting and the
        registry's validation, before the validating webhooks and storage, as in kube's
        Store)."""
        for plugin in self._validating:
            plugin.validate(attrs)

    @staticmethod
    def _invalid(served: ServedResource, exc: AdmissionError, obj: JsonDict) -> StatusError:
        details: JsonDict = {"name": exc.name or (obj.get("metadata") or {}).get("name", "")}
        if exc.group:
            details["group"] = exc.group
        details["kind"] = exc.kind or served.resource.kind
        if exc.causes:
            details["causes"] = [
                {"reason": c.reason, "message": c.message, "field": c.field} for c in exc.causes
            ]
        return StatusError(exc.status, exc.reason, exc.message, details)

    def _apply_crd_schema(
        self, served: ServedResource, obj: JsonDict, directive: Directive | None = None
    ) -> JsonDict:
        """Default, prune and validate a custom object by its CRD's structural schema.

        Raises:
            AdmissionError: the object does not match the schema.
        """
        crd = self.storage.get(
            ("apiextensions.k8s.io/customresourcedefinitions", "", served.crd_name)
        )
        if crd is None:
            return obj
        spec_schema = schema.version_schema(crd, served.resource.version)
        if spec_schema is None:
            return obj
        pruned: list[str] = []
        result, causes = schema.apply_schema(
            spec_schema,
            obj,
            kind=served.resource.kind,
            status_subresource=served.resource.has_status,
            pruned=pruned,
        )
        if directive is not None:
            directive.add_sorted_unknown([*directive.pending, *pruned])
            directive.pending = []
            refused = directive.finish()
            if refused is not None:
                raise _strict_refusal(directive, refused)
        if causes:
            name = str((obj.get("metadata") or {}).get("name", ""))
            raise AdmissionError(served.resource.kind, served.resource.group, name, causes)
        return result

    @staticmethod
    def _check_crd_schemas(crd: JsonDict) -> None:
        """A CRD whose schemas are not structural, or whose defaults are wrong, is refused
        (422), as kube does.

        kube validates the internal form of the CRD: when every version carries the same
        schema, conversion from v1 moves it to ``spec.validation`` (apiextensions/v1
        conversion.go), so the errors name ``spec.validation.openAPIV3Schema`` and are
        reported once; otherwise each version's own ``spec.versions[i].schema``.
        """
        problems: list[FieldError] = []
        versions = [v or {} for v in (crd.get("spec") or {}).get("versions") or []]
        schemas = [v.get("schema") for v in versions]
        if schemas and all(s == schemas[0] for s in schemas):
            root = (schemas[0] or {}).get("openAPIV3Schema")
            if root is not None:
                problems += schema.schema_errors(root, path="spec.validation.openAPIV3Schema")
        else:
            for i, own in enumerate(schemas):
                root = (own or {}).get("openAPIV3Schema")
                if root is not None:
                    problems += schema.schema_errors(
                        root, path=f"spec.versions[{i}].schema.openAPIV3Schema"
                    )
        if problems:
            name = str((crd.get("metadata") or {}).get("name", ""))
            causes = [p.cause() for p in problems]
            raise AdmissionError("CustomResourceDefinition", "apiextensions.k8s.io", name, causes)

    def _type(self, served: ServedResource) -> typeinfo.TypeNode | None:
        """The schema the field manager walks for ``served``'s objects."""
        r = served.resource
        if not served.custom:
            if r.group == "events.k8s.io":
                return typeinfo.builtin("", "v1", "Event")  # stored as core Events
            return typeinfo.builtin(r.group, r.version, r.kind)
        crd = self.storage.get(
            ("apiextensions.k8s.io/customresourcedefinitions", "", served.crd_name)
        )
        key = (served.crd_name, r.version, (crd or {}).get("metadata", {}).get("resourceVersion"))
        cached = self._types.get(key)
        if cached is None:
            found = schema.version_schema(crd, r.version) if crd is not None else None
            cached = typeinfo.from_crd_schema(found)
            self._types = {k: v for k, v in self._types.items() if k[0] != served.crd_name}
            self._types[key] = cached
        return cached

    def _record(
        self,
        served: ServedResource,
        old: JsonDict | None,
        new: JsonDict,
        *,
        entries: builtins.list[JsonDict],
        manager: str,
        subresource: str | None = None,
    ) -> builtins.list[JsonDict]:
        """managedFields after a non-apply write (see :func:`managedfields.record_update`)."""
        r = served.resource
        return managedfields.record_update(
            old,
            new,
            entries,
            manager=manager or "unknown",
            api_version=r.api_version,
            t=self._type(served),
            subresource=subresource,
            has_status=r.has_status,
        )

    def _validate_fields(
        self, served: ServedResource, obj: JsonDict, directive: Directive | None
    ) -> JsonDict:
        """A patched (or applied) built-in object without its unknown fields, which join
        the directive's issues in sorted order (custom resources: pruning reports them)."""
        if served.custom or directive is None:
            return obj
        t = self._type(served)
        if t is None:
            return obj
        unknown: list[str] = []
        try:
            cleaned = fieldvalidation.check_typed(obj, t, issues=None, unknown=unknown)
        except fieldvalidation.TypeError_ as exc:
            shown = directive.patch_value or quote(go_json(obj))
            raise _patch_invalid(shown, str(exc)) from None
        if directive.mode != "Ignore":
            directive.add_sorted_unknown(unknown)
        refused = directive.finish()
        if refused is not None:
            raise _strict_refusal(directive, refused)
        return dict(cleaned)

    def _decode_applied(self, served: ServedResource, merged: JsonDict, where: str) -> JsonDict:
        """The merged result of an apply as the typed object it becomes (structuredmerge's
        ``toVersioned``): quantities canonical; one that does not parse is a 500, as a
        failed conversion is."""
        t = self._type(served)
        if served.custom or t is None:
            return merged
        try:
            decoded: JsonDict = fieldvalidation.decode_quantities(merged, t)
        except fieldvalidation.TypeError_ as exc:
            r = served.resource
            raise StatusError(
                500,
                "",
                f"failed to convert new object ({where}) to proper version: unable to convert "
                f"unstructured object to {r.group}/{r.version}, Kind={r.kind}: {exc}",
            ) from None
        return decoded

    def check_events_v1(self, core_event: JsonDict) -> None:
        """The strict rules an ``events.k8s.io/v1`` create adds (eventTime, ...)."""
        try:
            self.strategy.validate_events_v1_create(core_event)
        except AdmissionError as exc:
            details: JsonDict = {"name": exc.name, "kind": exc.kind}
            details["causes"] = [
                {"reason": c.reason, "message": c.message, "field": c.field} for c in exc.causes
            ]
            raise StatusError(exc.status, exc.reason, exc.message, details) from None

    def decode_write(
        self, served: ServedResource, body: bytes, field_validation: str, content_type: str = ""
    ) -> tuple[Any, Directive]:
        """Decode a POST/PUT body as kube's decoder does: wrong JSON types are refused
        (400), unknown fields of built-ins dropped, and unknown or duplicate fields
        reported by ``field_validation`` (the directive carries what is left to report
        and the warnings). A YAML or protobuf body (by ``content_type``) is read by the
        content negotiation first; repeated keys are tracked in JSON bodies only."""
        if negotiation.is_json(content_type):
            try:
                obj, tracked = fieldvalidation.decode(body)
            except ValueError as exc:
                raise _bad_request(
                    f"the object provided is unrecognized: invalid JSON: {exc}"
                ) from None
        else:
            obj, tracked = negotiation.decode_body(body, content_type, custom=served.custom), False
        r = served.resource
        directive = Directive(mode=field_validation or "Warn")
        if not isinstance(obj, dict):
            return fieldvalidation.plain(obj) if tracked else obj, directive
        kind = obj.get("kind")
        if served.custom:
            _check_custom_type(r.kind, r.api_version, obj, body)
        if isinstance(kind, str) and kind:
            version = str(obj.get("apiVersion") or "").rpartition("/")[2]
            shown = f'"{version}"' if version.isalnum() else orjson.dumps(version).decode()
            directive.prefix = f"{kind} in version {shown} cannot be handled as a {r.kind}: "
        else:
            directive.prefix = f"the object provided is unrecognized (must be of type {r.kind}): "
        collect = directive.mode != "Ignore"
        try:
            if served.custom:
                if collect:
                    directive.issues.extend(
                        f'duplicate field "{p}"' for p in fieldvalidation.duplicates(obj)
                    )
                meta = obj.get("metadata")
                if isinstance(meta, dict):
                    unknown: list[str] = []
                    cleaned = fieldvalidation.check_typed(
                        meta, typeinfo.object_meta(), issues=None, unknown=unknown, path="metadata"
                    )
                    obj = {**obj, "metadata": cleaned}
                    if collect:
                        directive.pending = unknown
                return (fieldvalidation.plain(obj) if tracked else obj), directive
            t = self._type(served)
            if t is not None:
                issues: list[str] | None = [] if collect else None
                obj = fieldvalidation.check_typed(obj, t, issues=issues)
                directive.issues = issues or []
        except fieldvalidation.TypeError_ as exc:
            raise _bad_request(f"{directive.prefix}{exc}") from None
        refused = directive.finish()
        if refused is not None:
            raise _bad_request(refused)
        return (fieldvalidation.plain(obj) if tracked else obj), directive

    # -- reads -----------------------------------------------------------------------

    def get(self, served: ServedResource, namespace: str | None, name: str) -> JsonDict:
        """The stored object itself, shared with storage: never modify it (copy first)."""
        obj = self.storage.get(self._key(served, namespace, name))
        if obj is None:
            raise not_found(served, name)
        return self.served_form(served, self._render(served, obj))

    def parse_selectors(
        self, served: ServedResource, opts: ListOptions
    ) -> tuple[LabelSelector | None, FieldSelector | None]:
        from apiserver.storage.selectors import supported_fields
        from manager.labels import SelectorError

        r = served.resource
        try:
            labels = LabelSelector.parse(opts.label_selector) if opts.label_selector else None
            fields = (
                FieldSelector.parse(opts.field_selector, supported_fields(r.plural, r.group))
                if opts.field_selector
                else None
            )
        except SelectorError as exc:
            raise _bad_request(str(exc)) from None
        return labels, fields

    def parse_shard_selector(self, opts: ListOptions) -> ShardSelector | None:
        """The list's or watch's shard selector: None without the ShardedListAndWatch
        gate (the parameter is ignored) or without the parameter.

        Raises:
            StatusError: 500 ``invalid shard selector: ...`` without a reason, as
                kube-apiserver answers a ListOptions conversion that failed.
        """
        if not self.sharded_list_and_watch or opts.shard_selector == "":
            return None
        try:
            return parse_shard_selector(opts.shard_selector)
        except ShardSelectorError as exc:
            raise StatusError(500, "", f"invalid shard selector: {exc}") from None

    def list(self, served: ServedResource, namespace: str | None, opts: ListOptions) -> JsonDict:
        labels, fields = self.parse_selectors(served, opts)
        shards = self.parse_shard_selector(opts)
        r = served.resource
        ns = namespace if r.namespaced else None
        rv_text, match = opts.resource_version, opts.resource_version_match
        _check_list_options(opts)
        if rv_text not in ("", "0") and not opts.continue_:
            wanted = self._parse_rv(rv_text)
            if wanted > self.storage.revision and not self.storage.wait_for(
                wanted, FRESHNESS_TIMEOUT
            ):
                raise _too_large(wanted, self.storage.revision)
        start_after = ""
        snapshot_rev: int | None = None
        if opts.continue_:
            try:
                token = orjson.loads(base64.urlsafe_b64decode(opts.continue_.encode()))
                snapshot_rev, start_after = int(token["rv"]), str(token["start"])
            except (ValueError, KeyError, TypeError):
                snapshot_rev = 0
            if snapshot_rev == 0:
                raise _bad_request(
                    "continue key is not valid: incorrect encoded start resourceVersion"
                )
            if snapshot_rev < 0:  # an inconsistent continue: the latest revision
                snapshot_rev = None
            if rv_text not in ("", "0"):
                raise _bad_request("specifying resource version is not allowed when using continue")
        with self.storage.lock:
            current = self.storage.revision
            if snapshot_rev is not None:
                try:
                    items = self.storage.list_at(served.key, ns, snapshot_rev)
                except TooOldResourceVersion:
                    # handleCompactedErrorForPaging: a token for the rest of the list at
                    # the latest revision (rv -1) comes with the 410.
                    fresh = {"rv": -1, "start": start_after}
                    raise StatusError(
                        410,
                        "Expired",
                        INCONSISTENT_CONTINUE,
                        list_meta={
                            "continue": base64.urlsafe_b64encode(orjson.dumps(fresh)).decode()
                        },
                    ) from None
                list_rev = snapshot_rev
            elif match == "Exact":
                rv = self._parse_rv(rv_text)
                if rv > current:
                    raise _too_large(rv, current)
                try:
                    items = self.storage.list_at(served.key, ns, rv)
                except TooOldResourceVersion as exc:
                    raise StatusError(
                        410, "Expired", f"too old resource version: {rv} ({exc.oldest})"
                    ) from None
                list_rev = rv
            else:
                if rv_text not in ("", "0"):
                    rv = self._parse_rv(rv_text)
                    if rv > current:
                        raise _too_large(rv, current)
                items = self.storage.list(served.key, ns)
                list_rev = current
        if start_after:
            items = [o for o in items if self._sort_key(o) > start_after]
        limit = opts.limit if rv_text != "0" or opts.continue_ else 0

        def selected(o: JsonDict) -> bool:
            return (
                (labels is None or labels.matches((o.get("metadata") or {}).get("labels") or {}))
                and (fields is None or fields.matches(object_fields(r.plural, r.group, o)))
                and (shards is None or shards.matches(o))
            )

        if labels is not None or fields is not None or shards is not None:
            # A page needs only its first limit + 1 matches (whether more follow): each
            # page of a filtered paginated list costs a page, not a filter of everything.
            chosen = (o for o in items if selected(o))
            items = list(itertools.islice(chosen, limit + 1)) if limit else list(chosen)
        meta: JsonDict = {"resourceVersion": str(list_rev)}
        if limit and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            token = {"rv": list_rev, "start": self._sort_key(items[-1])}
            meta["continue"] = base64.urlsafe_b64encode(orjson.dumps(token)).decode()
            if labels is None and fields is None and shards is None:
                meta["remainingItemCount"] = remaining
        elif served.custom:
            meta["continue"] = ""
        if shards is not None:
            meta["shardInfo"] = {"selector": shards.string()}
        decode = self.decoder(served)
        return self._served_list(
            served,
            {
                "kind": f"{r.kind}List",
                "apiVersion": r.api_version,
                "metadata": meta,
                "items": [self._list_item(served, o, decode) for o in items],
            },
        )

    def _list_item(
        self, served: ServedResource, obj: JsonDict, decode: Callable[[JsonDict], JsonDict]
    ) -> JsonDict:
        """Built-in list items carry no kind/apiVersion (typed lists); custom ones do."""
        if served.custom:
            return self._render(served, obj, decode)
        return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}

    @staticmethod
    def _status_update(served: ServedResource, current: JsonDict, body: JsonDict) -> JsonDict:
        """What a PUT to ``/status`` stores (each resource's status strategy).

        Built-ins keep the body except spec and labels (deployment strategy.go and
        friends); custom resources and CRDs take only the status (ResetObjectMetaForStatus).
        """
        if served.custom or served.resource.kind == "CustomResourceDefinition":
            new = copy.deepcopy(current)
            if body.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = copy.deepcopy(body["status"])
            return new
        new = copy.deepcopy(body)
        new["apiVersion"] = current.get("apiVersion")
        new["kind"] = current.get("kind")
        if "spec" in current:
            new["spec"] = copy.deepcopy(current["spec"])
        else:
            new.pop("spec", None)
        meta = new.setdefault("metadata", {})
        cur_meta = current["metadata"]
        for k in (
            "labels",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "namespace",
            "name",
        ):
            if k in cur_meta:
                meta[k] = copy.deepcopy(cur_meta[k])
            else:
                meta.pop(k, None)
        for k, v in current.items():  # other top-level fields (ConfigMap-like) stay
            if k not in ("metadata", "spec", "status") and k not in new:
                new[k] = copy.deepcopy(v)
        return new

    @staticmethod
    def _sort_key(obj: JsonDict) -> str:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    @staticmethod
    def _parse_rv(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise _bad_request(
                f'resourceVersion: Invalid value: "{text}": must be an integer'
            ) from None
        if value < 0:
            raise _bad_request(f'resourceVersion: Invalid value: "{text}": must be non-negative')
        return value

    # -- create ----------------------------------------------------------------------

    def create(
        self,
        served: ServedResource,
        namespace: str | None,
        body: Any,
        *,
        manager: str = "",
        dry_run: bool = False,
        managed_fields: builtins.list[JsonDict] | None = None,
        directive: Directive | None = None,
        owned: bool = False,
    ) -> JsonDict:
        """Create an object; ``managed_fields`` (server-side apply) replaces the Update
        entry a create otherwise records for ``manager``. ``owned``: ``body`` is the
        caller's to give away (freshly decoded), so it is stored without a copy."""
        created = self._create(
            served,
            namespace,
            body,
            manager=manager,
            dry_run=dry_run,
            managed_fields=managed_fields,
            directive=directive,
            owned=owned,
        )
        return self.served_form(served, created)

    def _create(
        self,
        served: ServedResource,
        namespace: str | None,
        body: Any,
        *,
        manager: str,
        dry_run: bool,
        managed_fields: builtins.list[JsonDict] | None,
        directive: Directive | None,
        owned: bool,
    ) -> JsonDict:
        checked = self._check_body_type(served, body)
        obj = checked if owned else copy_json(checked)
        r = served.resource
        obj["apiVersion"] = r.api_version
        obj["kind"] = r.kind
        meta = obj.setdefault("metadata", {})
        if r.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise _bad_request(
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request"
                )
            meta["namespace"] = namespace or meta.get("namespace", "")
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise StatusError(
                500, "InternalError", "resourceVersion should not be set on objects to be created"
            )
        admitted_name = str(meta.get("name") or meta.get("generateName") or "Unknown")
        request_name = str(meta.get("name") or "")  # admission's name: "" before generation
        for k in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "managedFields",
            "selfLink",
        ):
            meta.pop(k, None)
        if r.has_status:
            if served.custom:
                obj.pop("status", None)  # custom resources: status only via /status
            elif r.kind == "Service" and not r.group:
                obj["status"] = {"loadBalancer": {}}
            elif r.kind == "Node" and not r.group:
                pass  # nodeStrategy.PrepareForCreate: a node may be created with its status
            else:
                obj["status"] = {}
        outermost = not _held(self.storage.lock)
        with self.storage.lock:
            self._check_namespace(served, namespace, creating=True, name=admitted_name)
            decoded = None
            if managed_fields is None and (r.kind, r.group) in _PLUGIN_DEFAULTED:
                decoded = self.strategy.default(
                    r.kind,
                    r.group,
                    obj,
                    allocate_cluster_ip=self._allocate_cluster_ip,
                    token_volume_suffix=self._token_suffix,
                    plugins=False,
                )
            attrs = self._attributes(
                served, "CREATE", namespace, obj, None, dry_run=dry_run, name=request_name
            )
            obj, given = self._mutate(
                served, obj, None, directive, attrs=attrs, outermost=outermost
            )
            if given is not None:  # the lock was released: the namespace may be going
                self._check_namespace(served, namespace, creating=True, name=admitted_name)
                if served.custom:
                    directive = None  # its unknown fields were reported before the webhooks
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                suffix = "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))
                # SimpleNameGenerator: the base is cut so the name stays within 63 characters.
                meta["name"] = f"{str(meta['generateName'])[:58]}{suffix}"
            obj = self._admit(served, obj, None, directive)
            meta = obj["metadata"]
            name = meta.get("name", "")
            # BeforeCreate: the object is complete before the validating admission
            meta["uid"] = meta.get("uid") or new_uid()  # a Job's selector names it
            meta["creationTimestamp"] = _now()
            if served.generation is not Generation.NONE:
                meta["generation"] = 1
            attrs = _with_obj(attrs, obj)
            self._check_policies(attrs)
            hooked = self._validate_by_webhooks(attrs, outermost)
            stored = self._stored_form(served, obj, outermost)
            if hooked or stored is not obj:
                self._check_namespace(served, namespace, creating=True, name=admitted_name)
            key = self._key(served, namespace, name)
            if self.storage.get(key) is not None:
                raise StatusError(
                    409,
                    "AlreadyExists",
                    f'{r.group_resource} "{name}" already exists',
                    _details(served, name),
                )
            if r.kind == "Pod" and not r.group:
                self._check_service_account(namespace or "", obj)
            if namespace and r.namespaced:
                try:
                    if self.quota is not None:
                        self.quota(served, namespace, obj, dry_run)
                except Refused as exc:
                    raise StatusError(
                        403,
                        "Forbidden",
                        f'{r.group_resource} "{name}" is forbidden: {exc}',
                        _details(served, name),
                    ) from None
            obj = stored
            crd_status: JsonDict | None = None
            if r.kind == "CustomResourceDefinition":
                obj = self._crd_accept(obj)
                # Stored first as kube's strategy leaves it (conditions null, names not yet
                # accepted); the naming/establishing controllers' write follows at once.
                crd_status = obj["status"]
                obj["status"] = {
                    "conditions": None,
                    "acceptedNames": {"plural": "", "kind": ""},
                    "storedVersions": crd_status["storedVersions"],
                }
            meta = obj["metadata"]
            if managed_fields is None:
                # the field manager runs before mutating admission (handlers/create.go):
                # what the policies and webhooks change is no one's
                if decoded is not None:
                    attributed = decoded
                elif given is not None:
                    attributed = given
                else:
                    attributed = obj
                managed_fields = self._record(served, None, attributed, entries=[], manager=manager)
            if managed_fields:
                meta["managedFields"] = managed_fields
            if dry_run:
                return self._render(served, obj)
            meta["resourceVersion"] = str(self.storage.next_revision())
            self.storage.commit("ADDED", key, obj)
            if r.kind == "Namespace" and not r.group:
                self._namespace_content(name, manager)
            if crd_status is not None:
                established = {
                    **obj,
                    "metadata": {
                        **meta,
                        "resourceVersion": str(self.storage.next_revision()),
                    },
                    "status": crd_status,
                }
                self.storage.commit("MODIFIED", key, established)
                self._serve_crd(established)
                for cb in self.on_crd_change:
                    cb()
        return self._render(served, obj)

    def _check_service_account(self, namespace: str, pod: JsonDict) -> None:
        sa = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        if self.storage.get(("/serviceaccounts", namespace, sa)) is None:
            name = (pod.get("metadata") or {}).get("name", "")
            raise StatusError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: error looking up service account {namespace}/{sa}: '
                f'serviceaccount "{sa}" not found',
                {"name": name, "kind": "pods"},
            )

    def _namespace_content(self, namespace: str, manager: str) -> None:
        """What kube-controller-manager adds to a new namespace: SA default, root CA map."""
        sa = self.registry.lookup("", "v1", "serviceaccounts")
        cm = self.registry.lookup("", "v1", "configmaps")
        assert sa is not None and cm is not None
        self.create(
            sa, namespace, {"metadata": {"name": "default"}}, manager="kube-controller-manager"
        )
        self.create(
            cm,
            namespace,
            {
                "metadata": {
                    "name": "kube-root-ca.crt",
                    "annotations": {"kubernetes.io/description": _ROOT_CA_DESCRIPTION},
                },
                "data": {"ca.crt": self.root_ca().cert_pem},
            },
            manager="kube-controller-manager",
        )

    def root_ca(self) -> rootca.RootCA:
        """The cluster's CA, made on first use (the server's start).

        Raises:
            rootca.RootCAError: it could not be made (no ``openssl``).
        """
        with self._root_ca_lock:
            if self._root_ca is None:
                self._root_ca = rootca.generate()
            return self._root_ca

    def _crd_accept(self, crd: JsonDict) -> JsonDict:
        spec = crd.get("spec") or {}
        names = dict(spec.get("names") or {})
        names.setdefault("singular", str(names.get("kind", "")).lower())
        names.setdefault("listKind", f"{names.get('kind', '')}List")
        now = _now()
        crd["status"] = {
            "acceptedNames": names,
            "storedVersions": [v["name"] for v in spec.get("versions") or [] if v.get("storage")],
            "conditions": [
                {
                    "type": "NamesAccepted",
                    "status": "True",
                    "reason": "NoConflicts",
                    "message": "no conflicts found",
                    "lastTransitionTime": now,
                },
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "message": "the initial names have been accepted",
                    "lastTransitionTime": now,
                },
            ],
        }
        return crd

    def bootstrap(self) -> None:
        """The namespaces every cluster has."""
        ns = self.registry.lookup("", "v1", "namespaces")
        assert ns is not None
        for name in _SYSTEM_NAMESPACES:
            self.create(ns, None, {"metadata": {"name": name}}, manager="kube-apiserver")

    # -- update ----------------------------------------------------------------------

    def _may_release(
        self,
        served: ServedResource,
        operation: str,
        namespace: str | None,
        subresource: str | None = None,
    ) -> bool:
        """Whether a write may call webhooks (and so release the lock and start over):
        an admission webhook's rules match it, or its CRD converts by webhook."""
        if self._converts_by_webhook(served):
            return True
        if self.webhooks is None or not self.webhooks.configured():
            return False
        probe = self._attributes(
            served, operation, namespace, None, None, subresource=subresource, name=""
        )
        return self.webhooks.wants(probe, mutating=True) or self.webhooks.wants(
            probe, mutating=False
        )

    def update(
        self,
        served: ServedResource,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        manager: str = "",
        dry_run: bool = False,
        managed_fields: builtins.list[JsonDict] | None = None,
        directive: Directive | None = None,
        owned: bool = False,
    ) -> JsonDict:
        """Replace an object (or its ``status``/``finalize`` subresource).

        ``managed_fields`` (server-side apply) replaces the Update entry an update
        otherwise records for ``manager``. ``owned``: ``body`` is the caller's to give
        away (freshly decoded or patched), so it is stored without a copy.
        """
        body = self._check_body_type(served, body)
        outermost = not _held(self.storage.lock)
        retryable = outermost and self._may_release(served, "UPDATE", namespace, subresource)
        pristine = copy_json(body) if retryable else body
        for attempt in range(_RETRIES):
            sent = copy_json(pristine) if retryable and attempt else body
            try:
                out = self._update(
                    served,
                    namespace,
                    name,
                    sent,
                    subresource=subresource,
                    manager=manager,
                    dry_run=dry_run,
                    managed_fields=managed_fields,
                    directive=directive,
                    owned=owned or (retryable and attempt > 0),
                    outermost=outermost,
                )
            except _Changed:
                continue
            return self.served_form(served, out)
        raise self._conflict(served, name)

    def _update(
        self,
        served: ServedResource,
        namespace: str | None,
        name: str,
        body: JsonDict,
        *,
        subresource: str | None,
        manager: str,
        dry_run: bool,
        managed_fields: builtins.list[JsonDict] | None,
        directive: Directive | None,
        owned: bool,
        outermost: bool,
    ) -> JsonDict:
        r = served.resource
        meta_in = body.get("metadata") or {}
        if meta_in.get("name") and meta_in["name"] != name:
            raise _bad_request(
                f"the name of the object ({meta_in['name']}) does not match the name on the "
                f"URL ({name})"
            )
        if r.namespaced and meta_in.get("namespace") and meta_in["namespace"] != namespace:
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        with self.storage.lock:
            key = self._key(served, namespace, name)
            stored = self.storage.get(key)
            if stored is None:
                raise not_found(served, name)
            # the old object as storage decodes it (defaulted): what the write compares
            # with and builds on (at the version served, below); the bytes stored are
            # what a no-op write is told by
            current = self.decoder(served)(stored)
            cur_meta = current["metadata"]
            if meta_in.get("uid") and meta_in["uid"] != cur_meta.get("uid"):
                raise self._uid_conflict(served, namespace, name, meta_in["uid"], cur_meta)
            rv = str(meta_in.get("resourceVersion") or "")
            if rv and rv != cur_meta["resourceVersion"]:
                raise self._conflict(served, name)
            original = stored  # the bytes stored: what a no-op write is told by
            if served.custom and current.get("apiVersion") != r.api_version:
                current = self._read_form(served, key, current, outermost)
                cur_meta = current["metadata"]
            if subresource == "status":
                new = self._status_update(served, current, body)
                if served.custom:
                    try:
                        new = self._apply_crd_schema(served, new, directive)
                    except AdmissionError as exc:
                        raise self._invalid(served, exc, new) from None
            elif subresource == "finalize":
                new = copy.deepcopy(current)
                new["spec"] = {
                    **(new.get("spec") or {}),
                    "finalizers": list((body.get("spec") or {}).get("finalizers") or []),
                }
            else:
                new = dict(body) if owned else copy_json(body)
                new["apiVersion"] = r.api_version
                new["kind"] = r.kind
                if r.has_status:
                    if "status" in current:
                        new["status"] = copy.deepcopy(current["status"])
                    else:
                        new.pop("status", None)
            meta = new.setdefault("metadata", {})
            meta["name"] = name
            if r.namespaced:
                meta["namespace"] = namespace or ""
            else:
                meta.pop("namespace", None)
            attrs = self._attributes(
                served, "UPDATE", namespace, new, current, subresource=subresource, dry_run=dry_run
            )
            given: JsonDict | None = None
            if subresource is None:
                for k in (
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                ):
                    if k in cur_meta:
                        meta[k] = cur_meta[k]
                    else:
                        meta.pop(k, None)
                new, given = self._mutate(
                    served, new, current, directive, attrs=attrs, outermost=outermost
                )
                if given is not None:
                    self._unchanged(key, current)
                    if r.has_status:  # PrepareForUpdate runs after admission: status kept
                        if "status" in current:
                            new["status"] = copy.deepcopy(current["status"])
                        else:
                            new.pop("status", None)
                    if served.custom:
                        directive = None  # its unknown fields were reported already
                new = self._admit(served, new, current, directive)
                meta = new["metadata"]
                if cur_meta.get("deletionTimestamp"):
                    added = set(meta.get("finalizers") or []) - set(
                        cur_meta.get("finalizers") or []
                    )
                    if added:
                        shown = ", ".join(orjson.dumps(f).decode() for f in sorted(added))
                        cause = Cause(
                            "FieldValueForbidden",
                            "Forbidden: no new finalizers can be added if the object is being "
                            f"deleted, found new finalizers []string{{{shown}}}",
                            "metadata.finalizers",
                        )
                        # kube finds it twice: rest.BeforeUpdate's common checks and the
                        # kind's own update validation both run ValidateObjectMetaUpdate
                        # (the message says it once: ToAggregate drops repeats)
                        raise self._invalid(
                            served,
                            AdmissionError(r.kind, r.group, name, [cause, cause]),
                            new,
                        )
                if "generation" in cur_meta and self._generation_changed(served, current, new):
                    meta["generation"] = int(cur_meta["generation"]) + 1
                if r.kind == "CustomResourceDefinition":
                    new["status"] = current.get("status", {})
            elif subresource == "status":
                mutated, given = self._mutate(
                    served, new, current, None, attrs=attrs, outermost=outermost
                )
                if given is not None:
                    self._unchanged(key, current)
                    # the status strategy runs after admission: only status changes stay
                    new = self._status_update(served, current, mutated)
                    if served.custom:
                        try:
                            new = self._apply_crd_schema(served, new, None)
                        except AdmissionError as exc:
                            raise self._invalid(served, exc, new) from None
                    meta = new.setdefault("metadata", {})
            meta["resourceVersion"] = cur_meta["resourceVersion"]
            entries = list(cur_meta.get("managedFields") or [])
            if managed_fields is None:
                if subresource is None and "managedFields" in meta_in:
                    entries = _supplied_managed_fields(meta_in.get("managedFields"), entries)
                attributed = new if given is None else given  # mutating admission's: no one's
                managed_fields = self._record(
                    served,
                    current,
                    attributed,
                    entries=entries,
                    manager=manager,
                    subresource=subresource,
                )
            if managed_fields:
                meta["managedFields"] = managed_fields
            else:
                meta.pop("managedFields", None)
            if subresource != "finalize":
                attrs = _with_obj(attrs, new)
                self._check_policies(attrs)
                if self._validate_by_webhooks(attrs, outermost):
                    self._unchanged(key, current)
            at_storage = self._stored_form(served, new, outermost)
            if at_storage is not new:
                self._unchanged(key, current)
                new = at_storage
                meta = new["metadata"]
            if _strip_for_compare(new) == _strip_for_compare(original) and managed_fields == list(
                cur_meta.get("managedFields") or []
            ):
                return self._render(served, original)
            if dry_run:
                return self._render(served, new)
            meta["resourceVersion"] = str(self.storage.next_revision())
            if (
                meta.get("deletionTimestamp")
                and not meta.get("finalizers")
                and not (r.kind == "Namespace" and (new.get("spec") or {}).get("finalizers"))
            ):
                self.storage.commit("DELETED", key, new)
                self._after_delete(served, new)
            else:
                self.storage.commit("MODIFIED", key, new)
                if r.kind == "CustomResourceDefinition":
                    self._serve_crd(new)
                    for cb in self.on_crd_change:
                        cb()
        return self._render(served, new)

    @staticmethod
    def _uid_conflict(
        served: ServedResource, namespace: str | None, name: str, uid: Any, cur_meta: JsonDict
    ) -> StatusError:
        """A PUT whose body names another uid: ``DefaultUpdatedObjectInfo`` makes the body's
        uid a storage precondition, checked before anything else; its ``InvalidObjError``
        becomes a 409 (``InterpretUpdateError``). The key is the etcd key kube shows."""
        key = "/".join(p for p in ("/registry", served.resource.plural, namespace, name) if p)
        return StatusError(
            409,
            "Conflict",
            f"Operation cannot be fulfilled on {served.resource.group_resource} "
            f'"{name}": StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, '
            f"AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in "
            f"object meta: {cur_meta.get('uid')}",
            _details(served, name),
        )

    def _conflict(self, served: ServedResource, name: str) -> StatusError:
        return Stale(
            409,
            "Conflict",
            f"Operation cannot be fulfilled on {served.resource.group_resource} "
            f'"{name}": the object '
            "has been modified; please apply your changes to the latest version and try again",
            _details(served, name),
        )

    @staticmethod
    def _generation_changed(served: ServedResource, old: JsonDict, new: JsonDict) -> bool:
        policy = served.generation
        if policy is Generation.NONE:
            return False
        if policy is Generation.NON_METADATA:
            skip = {"metadata", "status"} if served.resource.has_status else {"metadata"}
            return {k: v for k, v in old.items() if k not in skip} != {
                k: v for k, v in new.items() if k not in skip
            }
        if old.get("spec") != new.get("spec"):
            return True
        if policy is Generation.SPEC_AND_ANNOTATIONS:
            return (old["metadata"].get("annotations") or {}) != (
                new["metadata"].get("annotations") or {}
            )
        return False

    # -- patch -----------------------------------------------------------------------

    def patch_with_status(
        self,
        served: ServedResource,
        namespace: str | None,
        name: str,
        body: bytes,
        content_type: str,
        *,
        subresource: str | None = None,
        manager: str = "",
        dry_run: bool = False,
        force: bool = False,
        view: Callable[[JsonDict], JsonDict] | None = None,
        unview: Callable[[JsonDict], JsonDict] | None = None,
        directive: Directive | None = None,
        viewed: ServedResource | None = None,
    ) -> tuple[int, JsonDict]:
        """Apply a patch; the HTTP status comes with the object (201 when an apply created
        it). With ``view``/``unview``, the patch is applied to ``view(stored object)``
        (another API's shape of the same object, e.g. events.k8s.io over core Events) and
        the result stored as ``unview(patched)``; ``viewed`` is the resource that view is
        served as (an apply is checked and its fields owned in its version)."""
        ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
        kinds = {
            "application/merge-patch+json": "merge",
            "application/json-patch+json": "json",
            "application/strategic-merge-patch+json": "strategic",
            "application/apply-patch+yaml": "apply",
        }
        kind = kinds.get(ctype)
        if kind is None:
            raise StatusError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"{', '.join(kinds)}",
            )
        try:
            yaml_repeats: list[str] = []
            tracked = False
            if kind == "apply":
                doc, yaml_repeats = fieldvalidation.decode_yaml(body)
            else:
                doc, tracked = fieldvalidation.decode(body)
        except Exception as exc:
            if kind == "apply":
                raise _bad_request(f"error decoding YAML: {exc}") from None
            raise _bad_request(f"error decoding patch: {exc}") from None
        if directive is not None and yaml_repeats and directive.mode != "Ignore":
            if directive.mode == "Strict":
                raise _bad_request(
                    "error strict decoding YAML: error converting YAML to JSON: yaml: "
                    "unmarshal errors:\n  " + "\n  ".join(yaml_repeats)
                )
            directive.warnings.extend(yaml_repeats)
        if directive is not None and directive.mode != "Ignore":
            if kind == "json":
                directive.issues.extend(fieldvalidation.json_patch_issues(doc))
            else:
                directive.issues.extend(
                    f'duplicate field "{p}"' for p in fieldvalidation.duplicates(doc)
                )
        if tracked:
            doc = fieldvalidation.plain(doc)
        if kind == "apply":
            return self._apply(
                served,
                namespace,
                name,
                doc,
                subresource=subresource,
                manager=manager,
                dry_run=dry_run,
                force=force,
                view=view,
                unview=unview,
                directive=directive,
                viewed=viewed,
            )
        outermost = not _held(self.storage.lock)
        for _ in range(_RETRIES):
            with self.storage.lock:
                key = self._key(served, namespace, name)
                current = self._stored(served, key)
                if current is not None and view is not None:
                    current = view(current)
                if current is None:
                    raise not_found(served, name)
                if served.custom and current.get("apiVersion") != served.resource.api_version:
                    try:
                        current = self._read_form(served, key, current, outermost)
                    except _Changed:
                        continue
                try:
                    if kind == "merge":
                        new = patch.json_merge_patch(current, doc)
                    elif kind == "json":
                        new = patch.json_patch(current, doc)
                    elif not served.strategic_merge:
                        raise patch.PatchError(
                            415,
                            "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, "
                            "application/merge-patch+json, application/apply-patch+yaml",
                        )
                    else:
                        if not isinstance(doc, dict):
                            raise patch.PatchError(400, "BadRequest", "patch must be an object")
                        new = patch.strategic_merge_patch(current, doc, served.resource.kind)
                except patch.PatchError as exc:
                    raise StatusError(exc.status, exc.reason, exc.message, exc.details) from None
                if not isinstance(new, dict):
                    raise _bad_request("the patched object is not an object")
                if directive is not None:
                    # what patch.go shows as the bad value of a Strict refusal: the patched
                    # object's JSON (merge and JSON patch), or the patch map (strategic)
                    shown = go_v(doc) if kind == "strategic" else go_json(new)
                    directive.patch_value = quote(shown)
                new = self._validate_fields(served, new, directive)
                new_meta = new.get("metadata") or {}
                if not isinstance(new_meta, dict):
                    raise _bad_request("metadata: expected an object")
                patched_rv = new_meta.get("resourceVersion")
                if patched_rv and patched_rv != current["metadata"]["resourceVersion"]:
                    raise self._conflict(served, name)
                if new_meta.get("uid") and new_meta["uid"] != current["metadata"].get("uid"):
                    # patch.go gives the store no precondition (DefaultUpdatedObjectInfo(nil)):
                    # a patched uid reaches rest.BeforeUpdate, a 422 whose cause is listed
                    # twice: validateCommonFields checks the metadata, then the kind's own
                    # ValidateUpdate does again (its ValidateObjectMetaUpdate, or a custom
                    # resource's ValidateObjectMetaAccessorUpdate); the message drops repeats
                    cause = invalid_field("metadata.uid", new_meta["uid"], "field is immutable")
                    refused = AdmissionError(
                        served.resource.kind,
                        served.resource.group,
                        name,
                        [cause.cause(), cause.cause()],
                    )
                    raise self._invalid(served, refused, new)
                new = {
                    **new,
                    "metadata": {
                        **new_meta,
                        "resourceVersion": current["metadata"]["resourceVersion"],
                    },
                }
                if unview is not None:
                    new = unview(new)
            try:
                return 200, self.update(
                    served,
                    namespace,
                    name,
                    new,
                    subresource=subresource,
                    manager=manager,
                    dry_run=dry_run,
                    directive=directive,
                    owned=True,
                )
            except Stale:
                if _pins_resource_version(kind, doc):  # the patch's own precondition
                    raise
                # a write came between the read and the update: patch the new object
                # (patch.go's GuaranteedUpdate retries the same way)
        raise self._conflict(served, name)

    def _apply(
        self,
        served: ServedResource,
        namespace: str | None,
        name: str,
        doc: Any,
        *,
        subresource: str | None,
        manager: str,
        dry_run: bool,
        force: bool,
        view: Callable[[JsonDict], JsonDict] | None,
        unview: Callable[[JsonDict], JsonDict] | None,
        directive: Directive | None = None,
        viewed: ServedResource | None = None,
    ) -> tuple[int, JsonDict]:
        """Server-side apply (``application/apply-patch+yaml``), as fieldmanager does it."""
        shown = viewed or served  # the version the request speaks
        r = shown.resource
        if not isinstance(doc, dict):
            raise _bad_request(
                "the body of the request was in an unknown format: expected an object"
            )
        if str(doc.get("apiVersion") or "") != r.api_version:
            raise _bad_request(
                "Incorrect version specified in apply patch. Specified patch version: "
                f"{doc.get('apiVersion') or ''}, expected: {r.api_version}"
            )
        self._check_body_type(shown, doc)
        meta = doc.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise _bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the "
                f"URL ({name})"
            )
        if r.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        config = {**doc, "metadata": {**meta, "name": name}}
        # structuredmerge.go objectGVKNN(patchObj): the configuration's own metadata
        where = (
            f"{meta.get('namespace') or ''}/{meta.get('name') or ''}; "
            f"{r.group}/{r.version}, Kind={r.kind}"
        )
        undeclared = managedfields.undeclared(config, self._type(shown))
        if undeclared:
            text = (
                undeclared[0] if len(undeclared) == 1 else "errors:\n  " + "\n  ".join(undeclared)
            )
            raise StatusError(500, "", f"failed to create typed patch object ({where}): {text}")
        if r.namespaced:
            config["metadata"]["namespace"] = namespace or ""
        outermost = not _held(self.storage.lock)
        for _ in range(_RETRIES):
            with self.storage.lock:
                key = self._key(served, namespace, name)
                current = self._stored(served, key)
                if current is not None and view is not None:
                    current = view(current)
                if current is None and subresource is not None:
                    raise not_found(served, name)
                if (
                    current is not None
                    and served.custom
                    and current.get("apiVersion") != served.resource.api_version
                ):
                    try:
                        current = self._read_form(served, key, current, outermost)
                    except _Changed:
                        continue
                entries = list(((current or {}).get("metadata") or {}).get("managedFields") or [])
                try:
                    merged, managed = managedfields.apply(
                        current,
                        config,
                        entries,
                        manager=manager,
                        api_version=r.api_version,
                        t=self._type(shown),
                        force=force,
                        subresource=subresource,
                        has_status=r.has_status,
                        sent=doc,
                    )
                except managedfields.ConflictError as exc:
                    raise StatusError(
                        409,
                        "Conflict",
                        exc.message(),
                        {
                            "causes": [
                                {
                                    "reason": "FieldManagerConflict",
                                    "message": f"conflict with {c.manager}",
                                    "field": c.path,
                                }
                                for c in exc.conflicts
                            ]
                        },
                    ) from None
                merged = self._decode_applied(shown, merged, where)
                applied_rv = meta.get("resourceVersion")
                if current is None:
                    merged["metadata"].pop("resourceVersion", None)
                else:
                    if applied_rv and str(applied_rv) != current["metadata"]["resourceVersion"]:
                        raise self._conflict(served, name)
                    merged["metadata"] = {
                        **merged["metadata"],
                        "resourceVersion": current["metadata"]["resourceVersion"],
                    }
                if unview is not None:
                    merged = unview(merged)
            if current is None:
                try:
                    created = self.create(
                        served,
                        namespace,
                        merged,
                        manager=manager,
                        dry_run=dry_run,
                        managed_fields=managed,
                    )
                except StatusError as exc:
                    if exc.reason != "AlreadyExists":
                        raise
                    continue  # created meanwhile: apply to it
                return 201, created
            try:
                return 200, self.update(
                    served,
                    namespace,
                    name,
                    merged,
                    subresource=subresource,
                    manager=manager,
                    dry_run=dry_run,
                    managed_fields=managed,
                    directive=directive,
                )
            except Stale:
                if applied_rv:
                    raise
        raise self._conflict(served, name)

    # -- delete ----------------------------------------------------------------------

    def delete(
        self,
        served: ServedResource,
        namespace: str | None,
        name: str,
        options: DeleteOptions,
        *,
        manager: str = "",
    ) -> tuple[bool, JsonDict]:
        """Delete (or start deleting) one object.

        Returns:
            ``(gone, object)``: whether the object is gone now, and its last state.
        """
        invalid = _invalid_delete_options(options)  # the handler's check, before any lookup
        if invalid is not None:
            raise invalid
        outermost = not _held(self.storage.lock)
        for _ in range(_RETRIES):
            try:
                gone, last = self._delete(served, namespace, name, options, outermost=outermost)
            except _Changed:
                continue
            return gone, self.served_form(served, last)
        raise self._conflict(served, name)

    def _delete(
        self,
        served: ServedResource,
        namespace: str | None,
        name: str,
        options: DeleteOptions,
        *,
        outermost: bool,
    ) -> tuple[bool, JsonDict]:
        r = served.resource
        with self.storage.lock:
            key = self._key(served, namespace, name)
            current = self._stored(served, key)
            if current is None:
                raise not_found(served, name)
            cur_meta = current["metadata"]
            _check_preconditions(served, options.preconditions or {}, cur_meta)
            policy = options.propagation_policy
            if not policy and options.orphan_dependents is not None:
                policy = "Orphan" if options.orphan_dependents else "Background"
            policy = policy or served.default_propagation  # the strategy's default
            old = current
            if served.custom and current.get("apiVersion") != r.api_version:
                old = self._read_form(served, key, current, outermost)
            attrs = self._attributes(
                served, "DELETE", namespace, None, old, dry_run=options.dry_run
            )
            attrs = dataclasses.replace(attrs, options=_delete_options_object(options))
            if self.webhooks is not None and self.webhooks.wants(attrs, mutating=True):
                with self._unlocked(outermost):  # they may refuse; there is nothing to patch
                    self.webhooks.admit(attrs, self._decoder(served, current))
                self._unchanged(key, current)
            self._check_policies(attrs)
            if self._validate_by_webhooks(attrs, outermost):
                self._unchanged(key, current)
            finalizers = list(cur_meta.get("finalizers") or [])
            is_crd = r.kind == "CustomResourceDefinition"
            crd_first_delete = is_crd and not cur_meta.get("deletionTimestamp")
            if crd_first_delete and CRD_CLEANUP_FINALIZER not in finalizers:
                # The CRD registry's Delete: instances go first, behind this finalizer.
                finalizers.append(CRD_CLEANUP_FINALIZER)
            if policy == "Orphan" and "orphan" not in finalizers:
                finalizers = [f for f in finalizers if f != "foregroundDeletion"] + ["orphan"]
            elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
                finalizers = [f for f in finalizers if f != "orphan"] + ["foregroundDeletion"]
            is_pod = r.kind == "Pod" and not r.group
            pod_grace = self._pod_grace(current, options) if is_pod else 0
            if is_pod and cur_meta.get("deletionTimestamp") and pod_grace and not finalizers:
                return self._shorten_grace(served, key, current, options)
            if pod_grace and not cur_meta.get("deletionTimestamp"):
                # Bound to a node: only marked; the kubelet finishes (or grace 0 forces it).
                new = copy.deepcopy(current)
                meta = new["metadata"]
                when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=pod_grace)
                meta["deletionTimestamp"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
                meta["deletionGracePeriodSeconds"] = pod_grace
                if finalizers:
                    meta["finalizers"] = finalizers
                if meta.get("generation"):
                    meta["generation"] = int(meta["generation"]) + 1
                if options.dry_run:
                    return False, self._render(served, new)
                meta["resourceVersion"] = str(self.storage.next_revision())
                self.storage.commit("MODIFIED", key, new)
                return False, self._render(served, new)
            namespace_pending = (
                r.kind == "Namespace"
                and not r.group
                and bool((current.get("spec") or {}).get("finalizers"))
            )
            if finalizers or namespace_pending:
                new = copy.deepcopy(current)
                meta = new["metadata"]
                changed = finalizers != list(cur_meta.get("finalizers") or [])
                if finalizers:
                    meta["finalizers"] = finalizers
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = _now()
                    # The namespace and CRD registries' own Delete sets only the timestamp;
                    # the generic store's markAsDeleting adds grace 0 and a new generation.
                    if not (namespace_pending or crd_first_delete):
                        meta["deletionGracePeriodSeconds"] = 0
                        if meta.get("generation"):
                            meta["generation"] = int(meta["generation"]) + 1
                    changed = True
                if namespace_pending:
                    new["status"] = {**(new.get("status") or {}), "phase": "Terminating"}
                if is_crd and not cur_meta.get("deletionTimestamp"):
                    status = new.get("status") or {}
                    conditions = [
                        c for c in status.get("conditions") or [] if c.get("type") != "Terminating"
                    ]
                    conditions.append(
                        {
                            "type": "Terminating",
                            "status": "True",
                            "lastTransitionTime": _now(),
                            "reason": "InstanceDeletionPending",
                            "message": "CustomResourceDefinition marked for deletion; "
                            "CustomResource deletion will begin soon",
                        }
                    )
                    new["status"] = {**status, "conditions": conditions}
                if not changed and new == current:
                    return False, self._render(served, current)
                if options.dry_run:
                    return False, self._render(served, new)
                meta["resourceVersion"] = str(self.storage.next_revision())
                self.storage.commit("MODIFIED", key, new)
                return False, self._render(served, new)
            if is_pod and not cur_meta.get("deletionTimestamp"):
                # CheckGracefulDelete made the grace 0 (unscheduled, finished or asked):
                # BeforeDelete still marks the pod, the store writes that, then deletes it.
                marked = copy.deepcopy(current)
                meta = marked["metadata"]
                meta["deletionTimestamp"] = _now()
                meta["deletionGracePeriodSeconds"] = 0
                if meta.get("generation"):
                    meta["generation"] = int(meta["generation"]) + 1
                if options.dry_run:
                    return True, self._render(served, marked)
                meta["resourceVersion"] = str(self.storage.next_revision())
                self.storage.commit("MODIFIED", key, marked)
                current = marked
            if options.dry_run:
                return True, self._render(served, current)
            gone = copy.deepcopy(current)
            gone["metadata"]["resourceVersion"] = str(self.storage.next_revision())
            self.storage.commit("DELETED", key, gone)
            self._after_delete(served, gone)
            return True, self._render(served, gone)

    def _shorten_grace(
        self, served: ServedResource, key: ObjectKey, current: JsonDict, options: DeleteOptions
    ) -> tuple[bool, JsonDict]:
        """A second DELETE of a terminating pod may only shorten its grace period
        (``BeforeDelete``): the deadline moves back by the difference."""
        meta = current["metadata"]
        period = options.grace_period_seconds
        old_period = meta.get("deletionGracePeriodSeconds")
        if period is None or old_period is None or period >= int(old_period):
            return False, self._render(served, current)
        new = copy_json(current)
        deadline = dt.datetime.fromisoformat(str(meta["deletionTimestamp"]).replace("Z", "+00:00"))
        deadline += dt.timedelta(seconds=period - int(old_period))
        new["metadata"]["deletionTimestamp"] = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
        new["metadata"]["deletionGracePeriodSeconds"] = period
        if options.dry_run:
            return False, self._render(served, new)
        new["metadata"]["resourceVersion"] = str(self.storage.next_revision())
        self.storage.commit("MODIFIED", key, new)
        return False, self._render(served, new)

    @staticmethod
    def _pod_grace(pod: JsonDict, options: DeleteOptions) -> int:
        """Seconds of graceful termination a DELETE gives this pod (0: delete now).

        Only a pod bound to a node terminates gracefully; an unscheduled one goes at once.
        """
        if not (pod.get("spec") or {}).get("nodeName"):
            return 0
        if options.grace_period_seconds is not None:
            return max(0, int(options.grace_period_seconds))
        meta = pod.get("metadata") or {}
        if meta.get("deletionGracePeriodSeconds") is not None:
            return int(meta["deletionGracePeriodSeconds"])
        value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return 30 if value is None else max(0, int(value))

    def _serve_crd(self, crd: JsonDict) -> None:
        """Serve what a CRD defines; a resource served for the first time gets its watch
        cache's start (the current revision)."""
        for served in self.registry.register_crd(crd):
            self._watch_floors.setdefault(served.key, self.storage.revision)

    def watch_floor(self, served: ServedResource) -> int:
        """The oldest resourceVersion a watch of ``served`` may start from (kube's
        watchCache: the revision its first list was at; 0 for the built-ins, whose
        caches start with the server)."""
        with self.storage.lock:
            return self._watch_floors.get(served.key, 0)

    def _after_delete(self, served: ServedResource, obj: JsonDict) -> None:
        if served.resource.kind == "CustomResourceDefinition":
            for gone in self.registry.by_crd(obj["metadata"]["name"]):
                self._watch_floors.pop(gone.key, None)
            self.registry.unregister_crd(obj["metadata"]["name"])
            for cb in self.on_crd_change:
                cb()

    def delete_answer(self, served: ServedResource, gone: bool, obj: JsonDict) -> JsonDict:
        """The body kube-apiserver answers a DELETE with."""
        if not gone or served.delete_returns_object:
            return obj
        meta = obj.get("metadata") or {}
        # The generic store's Status carries no code (the handler only fills one in when
        # the storage returned nothing at all).
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": _details(served, meta.get("name", ""), uid=meta.get("uid")),
        }

    def delete_collection(
        self,
        served: ServedResource,
        namespace: str | None,
        opts: ListOptions,
        options: DeleteOptions,
        *,
        manager: str = "",
    ) -> JsonDict:
        listed = self.list(
            served,
            namespace,
            ListOptions(label_selector=opts.label_selector, field_selector=opts.field_selector),
        )
        deleted = []
        for obj in listed["items"]:
            meta = obj["metadata"]
            try:
                _, last = self.delete(
                    served, meta.get("namespace"), meta["name"], options, manager=manager
                )
            except StatusError as exc:
                if exc.code == 404:
                    continue
                raise
            deleted.append(last)
        listed["items"] = deleted
        listed["metadata"] = {"resourceVersion": str(self.storage.revision)}
        return listed
