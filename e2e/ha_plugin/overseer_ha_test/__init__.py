"""The controller the HA end-to-end tests run in every ``overseer run`` process.

It is installed for those processes only, through ``PYTHONPATH`` (this directory holds a
``.dist-info`` with its entry point), never into the development environment.

For each ConfigMap labelled ``overseer-ha-test=true`` whose ``data.tick`` differs from
the annotation ``ha/tick``, it marks the object in flight (``ha/inflight=<identity>``),
holds it briefly, then records the tick, its identity and the time. Every write carries
the observed resourceVersion. If it finds another identity in flight *and* that
identity currently holds the Lease, two processes are reconciling the same key at once:
it records ``ha/violation``. (A marker left by a killed leader is not a violation: that
process no longer holds the Lease.)

With ``blind: true`` it writes as a careless controller does: it holds the key
``holdSeconds``, then records the tick with a merge patch that carries no
resourceVersion, so nothing on the server refuses a stale replica's write — only the
write fence stands between a paused leader that wakes up and the object.

With ``records: true`` (not blind) it also leaves a record of each tick it reconciles,
after the hold and before recording the tick: a ConfigMap created with ``generateName``
(``<name>-tick-``, labelled ``ha-record-of=<name>``, ``ha-record-tick=<tick>``), the
kind of create nothing on the server refuses twice. A create whose answer was lost
(``OutcomeUnknown``) fails the reconcile; the next one lists the records first and
creates none if the earlier create was applied. So a tick recorded twice means the
client sent one create twice (the chaos suite's ``reset-after-commit`` counts them).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import time
from dataclasses import dataclass, field

from manager import (
    Conflict,
    Funcs,
    JsonDict,
    Manager,
    NotFound,
    PluginContext,
    Request,
    Result,
    builtin,
)

CONFIGMAPS = builtin("v1", "configmaps")
LEASES = builtin("coordination.k8s.io/v1", "leases")
LABEL = "overseer-ha-test"
RECORD_OF, RECORD_TICK = "ha-record-of", "ha-record-tick"


@dataclass(frozen=True, kw_only=True, slots=True)
class HaTestConfig:
    hold_seconds: float = field(default=0.05, metadata={"min": 0.0, "help": "time in flight"})
    lease_name: str = field(default="overseer-leader", metadata={"help": "Lease to check"})
    lease_namespace: str = field(default="default", metadata={"help": "its namespace"})
    blind: bool = field(default=False, metadata={"help": "write without a resourceVersion"})
    records: bool = field(default=False, metadata={"help": "a generateName record per tick"})


class HaTestReconciler:
    def __init__(self, mgr: Manager, config: HaTestConfig) -> None:
        self._client = mgr.client
        self._lister = mgr.lister(CONFIGMAPS)
        self._me = mgr.identity
        self._config = config

    def reconcile(self, request: Request) -> Result:
        cached = self._lister.get(request.name, request.namespace)
        if cached is None:
            return Result()
        if self._config.blind:
            return self._blind(request, cached)
        try:
            obj = self._client.get(CONFIGMAPS, request.name, request.namespace)
        except NotFound:
            return Result()
        tick = (obj.get("data") or {}).get("tick", "")
        ann = obj["metadata"].get("annotations") or {}
        if ann.get("ha/tick") == tick:
            return Result()
        other = ann.get("ha/inflight", "")
        if other and other != self._me and other == self._holder():
            ann = {**ann, "ha/violation": f"{self._me} found {other} in flight"}
        obj = copy.deepcopy(obj)
        obj["metadata"]["annotations"] = {**ann, "ha/inflight": self._me}
        try:
            obj = self._client.replace(CONFIGMAPS, obj, request.namespace)
        except Conflict:
            return Result(requeue=True)
        time.sleep(self._config.hold_seconds)
        if self._config.records:
            self._record(request, tick)
        ann = dict(obj["metadata"].get("annotations") or {})
        ann.update(
            {"ha/inflight": "", "ha/tick": tick, "ha/by": self._me, "ha/at": repr(time.time())}
        )
        obj["metadata"]["annotations"] = ann
        try:
            self._client.replace(CONFIGMAPS, obj, request.namespace)
        except Conflict:
            return Result(requeue=True)
        return Result()

    def _blind(self, request: Request, cached: JsonDict) -> Result:
        tick = (cached.get("data") or {}).get("tick", "")
        if (cached["metadata"].get("annotations") or {}).get("ha/tick") == tick:
            return Result()
        time.sleep(self._config.hold_seconds)
        ann = {"ha/tick": tick, "ha/by": self._me, "ha/at": repr(time.time())}
        patch = {"metadata": {"annotations": ann}}
        with contextlib.suppress(NotFound):
            self._client.patch(CONFIGMAPS, request.name, patch, namespace=request.namespace)
        return Result()

    def _record(self, request: Request, tick: str) -> None:
        """One record of ``tick``: created unless a live list finds one already."""
        labels = {RECORD_OF: request.name, RECORD_TICK: tick}
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        if self._client.list(CONFIGMAPS, request.namespace, label_selector=selector)["items"]:
            return
        body = {
            "metadata": {"generateName": f"{request.name}-tick-", "labels": labels},
            "data": {"by": self._me},
        }
        self._client.create(CONFIGMAPS, body, request.namespace)

    def _holder(self) -> str:
        try:
            lease = self._client.get(LEASES, self._config.lease_name, self._config.lease_namespace)
        except NotFound:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _labelled(obj: JsonDict) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL) == "true"


def _data_changed(old: JsonDict, new: JsonDict) -> bool:
    return _labelled(new) and old.get("data") != new.get("data")


class HaTestPlugin:
    config_class = HaTestConfig

    def setup(self, mgr: Manager, ctx: PluginContext[HaTestConfig]) -> None:
        config = ctx.config
        if not config.lease_name:
            config = dataclasses.replace(config, lease_name=mgr.options.leader_election_id)
        predicate = Funcs(on_create=_labelled, on_update=_data_changed, on_delete=lambda o: False)
        ctx.controller(HaTestReconciler(mgr, config)).for_(CONFIGMAPS, predicate).complete()
