"""Overseer: a Kubernetes controller manager in Python.

This module is the public API: controllers (built-in and third-party) import from
``manager`` only. Everything else may change without notice.
"""

from __future__ import annotations

from manager.cache.frozen import freeze, thaw
from manager.cache.informer import SharedInformer
from manager.cache.lister import Lister
from manager.cache.store import BY_CONTROLLER_UID, BY_NAMESPACE, BY_OWNER_UID
from manager.client import KubeClient
from manager.controller import Controller
from manager.errors import (
    AlreadyExists,
    ApiError,
    ClusterNotFound,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NamespaceTerminating,
    NotFound,
    OutcomeUnknown,
    ServerError,
    TerminalError,
    TooManyRequests,
    Unavailable,
    WriteFenced,
)
from manager.events import NORMAL, WARNING, EventRecorder
from manager.fleet import Cluster, ClusterProvider, ClusterSink, ClusterSource
from manager.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    MapFunc,
)
from manager.keys import DeletedFinalStateUnknown, JsonDict, meta_namespace_key
from manager.labels import LabelSelector, label_selector_from_dict
from manager.manager import ControllerBuilder, Manager, ManagerOptions
from manager.metrics import REGISTRY, ControllerMetrics
from manager.plugins import ControllerPlugin, ControllerSettings, PluginContext
from manager.predicate import (
    AnnotationChanged,
    Funcs,
    GenerationChanged,
    LabelChanged,
    LabelSelectorPredicate,
    Predicate,
    ResourceVersionChanged,
    all_of,
    any_of,
    not_,
)
from manager.reconcile import Reconciler, Request, Result, incarnation
from manager.resources import Resource, UnknownResource, builtin
from manager.webhook import (
    Admission,
    AdmissionRequest,
    Conversion,
    MatchCondition,
    MutatingWebhook,
    Rule,
    Spoke,
    ValidatingWebhook,
)

__all__ = [
    "BY_CONTROLLER_UID",
    "BY_NAMESPACE",
    "BY_OWNER_UID",
    "NORMAL",
    "REGISTRY",
    "WARNING",
    "Admission",
    "AdmissionRequest",
    "AlreadyExists",
    "AnnotationChanged",
    "ApiError",
    "Cluster",
    "ClusterNotFound",
    "ClusterProvider",
    "ClusterSink",
    "ClusterSource",
    "Conflict",
    "Controller",
    "ControllerBuilder",
    "ControllerMetrics",
    "ControllerPlugin",
    "ControllerSettings",
    "Conversion",
    "DeletedFinalStateUnknown",
    "EnqueueRequestForObject",
    "EnqueueRequestForOwner",
    "EnqueueRequestsFromMapFunc",
    "EventRecorder",
    "Forbidden",
    "Funcs",
    "GenerationChanged",
    "Gone",
    "Invalid",
    "JsonDict",
    "KubeClient",
    "LabelChanged",
    "LabelSelector",
    "LabelSelectorPredicate",
    "Lister",
    "Manager",
    "ManagerOptions",
    "MapFunc",
    "MatchCondition",
    "MutatingWebhook",
    "NamespaceTerminating",
    "NotFound",
    "OutcomeUnknown",
    "PluginContext",
    "Predicate",
    "Reconciler",
    "Request",
    "Resource",
    "ResourceVersionChanged",
    "Result",
    "Rule",
    "ServerError",
    "SharedInformer",
    "Spoke",
    "TerminalError",
    "TooManyRequests",
    "Unavailable",
    "UnknownResource",
    "ValidatingWebhook",
    "WriteFenced",
    "all_of",
    "any_of",
    "builtin",
    "freeze",
    "incarnation",
    "label_selector_from_dict",
    "meta_namespace_key",
    "not_",
    "thaw",
]

__version__ = "0.1.0"
