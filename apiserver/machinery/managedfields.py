"""Field ownership: ``metadata.managedFields`` and server-side apply, as kube computes them.

A port of the parts of ``sigs.k8s.io/structured-merge-diff`` (field sets, typed compare,
merge, apply with conflicts and pruning) and of
``k8s.io/apimachinery/pkg/util/managedfields/internal`` (manager identifiers, the
``current-operation`` update rule, stripped metadata, sorting and encoding of
``ManagedFieldsEntry``) that a client can observe.

Field sets are kept in their wire form, ``FieldsV1``: a trie of path elements
(``f:name``, ``k:{"name":"c"}``, ``v:"x"``, ``i:0``) where an empty child, or a child
holding ``"."``, marks a member. The set operations here work on that form directly, so
a write never converts managed fields back and forth; they return new dicts and never
mutate their inputs (stored objects share subtrees).

* Update operations (POST, PUT, non-apply PATCH): the writer's entry
  ``(manager, Update, apiVersion, subresource)`` gains every field the write added or
  changed, other entries lose them, and every entry loses removed fields
  (:func:`record_update`). Nothing changed: no entry moves, no time is bumped.
* Apply (:func:`apply`): the applied configuration is merged into the live object by
  the schema's list/map semantics; fields another manager owns and the apply changes
  are conflicts (409, one cause each) unless ``force``; fields this applier applied
  before, applies no more and nobody else owns are removed from the object.

Thread-safety: pure functions over JSON values; safe from any thread.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from apiserver.machinery import typeinfo
from apiserver.machinery.typeinfo import LIST, MAP, STRUCT, TypeNode

__all__ = [
    "Conflict",
    "ConflictError",
    "apply",
    "path_string",
    "record_update",
    "undeclared",
]

JsonDict = dict[str, Any]
Fields = dict[str, Any]  # a FieldsV1 trie

DOT: Final = "."
# Never owned (stripmeta.go): identity and server-set metadata.
_STRIPPED_META: Final = frozenset(
    {
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    }
)


# --- FieldsV1 set operations ----------------------------------------------------------


def _member(node: Fields) -> bool:
    return not node or DOT in node


def _make(member: bool, children: Fields) -> Fields:
    if member and children:
        return {DOT: {}, **children}
    return children if children else {}


def _kids(node: Fields) -> Iterator[tuple[str, Fields]]:
    for k, v in node.items():
        if k != DOT:
            yield k, v


def union(a: Fields, b: Fields) -> Fields:
    """Every member of ``a`` or ``b`` (root membership is not tracked)."""
    if not a:
        return b
    if not b:
        return a
    out = {k: v for k, v in _kids(a)}
    for k, v in _kids(b):
        if k in out:
            mine = out[k]
            member = _member(mine) or _member(v)
            out[k] = _make(member, dict(_kids(union(mine, v))))
        else:
            out[k] = v
    return out


def difference(a: Fields, b: Fields) -> Fields:
    """The members of ``a`` that are not members of ``b``."""
    if not a or not b:
        return a
    out: Fields = {}
    for k, v in _kids(a):
        other = b.get(k)
        if other is None:
            out[k] = v
            continue
        member = _member(v) and not _member(other)
        kids = dict(_kids(difference(dict(_kids(v)), dict(_kids(other))))) if v else {}
        if member or kids:
            out[k] = _make(member, kids)
    return out


def intersection(a: Fields, b: Fields) -> Fields:
    """The members of both ``a`` and ``b``."""
    out: Fields = {}
    if not a or not b:
        return out
    for k, v in _kids(a):
        other = b.get(k)
        if other is None:
            continue
        member = _member(v) and _member(other)
        kids = intersection(dict(_kids(v)), dict(_kids(other))) if v and other else {}
        if member or kids:
            out[k] = _make(member, kids)
    return out


def leaves(node: Fields, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every member path of a set, parents before children, in key order."""
    for k, v in sorted(_kids(node), key=lambda kv: _order(kv[0])):
        path = (*prefix, k)
        if _member(v):
            yield path
        yield from leaves(v, path)


def _order(element: str) -> tuple[int, str]:
    return ("fkvi".find(element[:1]), element[2:])


# --- paths ----------------------------------------------------------------------------


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def path_string(path: tuple[str, ...]) -> str:
    """A path as kube prints it: ``.spec.containers[name="c"].image``, ``[="x"]``, ``[0]``."""
    out = []
    for element in path:
        tag, text = element[:2], element[2:]
        if tag == "f:":
            out.append(f".{text}")
        elif tag == "k:":
            key = orjson.loads(text)
            out.append("[" + ",".join(f"{k}={_json(key[k])}" for k in sorted(key)) + "]")
        elif tag == "v:":
            out.append(f"[={text}]")
        else:
            out.append(f"[{text}]")
    return "".join(out)


def _item_element(item: Any, t: TypeNode) -> str | None:
    if t.list_type == "set":
        return f"v:{_json(item)}"
    if t.list_type == "map" and isinstance(item, dict):
        key = {}
        for k in t.keys:
            if k in item:
                key[k] = item[k]
            elif k in t.key_defaults:
                key[k] = t.key_defaults[k]
        if not key:
            return None
        return f"k:{_json(key)}"
    return None


# --- typed walks ----------------------------------------------------------------------


def _child_type(t: TypeNode | None, key: str) -> TypeNode | None:
    if t is None:
        return None
    if t.kind == STRUCT:
        return t.fields().get(key)
    if t.kind == MAP:
        return t.elem
    return None


def _walk(value: Any, t: TypeNode | None) -> int:
    """1: ``value`` is walked key by key (granular struct or map), 2: item by item
    (a set or a map-list), 0: it is a leaf (scalars, atomic values)."""
    if t is None:
        return 1 if isinstance(value, dict) else 0  # deduced: maps granular, lists atomic
    w = t.walk
    if w == 1:
        return 1 if isinstance(value, dict) else 0
    if w == 2:
        return 2 if isinstance(value, list) else 0
    return 0


def _is_map(value: Any, t: TypeNode | None) -> bool:
    return _walk(value, t) == 1


def _is_granular_list(value: Any, t: TypeNode | None) -> bool:
    return _walk(value, t) == 2


def to_set(value: Any, t: TypeNode | None) -> Fields:
    """``ToFieldSet``: every leaf of ``value``; items of keyed lists are members too."""
    out: Fields = {}
    w = _walk(value, t)
    if w == 1:
        fields = t.fields() if t is not None and t.kind == STRUCT else None
        elem = t.elem if t is not None and t.kind == MAP else None
        for k, v in value.items():
            ct = fields.get(k) if fields is not None else elem
            out[f"f:{k}"] = to_set(v, ct) if _walk(v, ct) else {}
    elif w == 2:
        assert t is not None
        for item in value:
            element = _item_element(item, t)
            if element is not None:
                out[element] = _make(True, to_set(item, t.elem) if _walk(item, t.elem) == 1 else {})
    return out


def _subtree(value: Any, t: TypeNode | None) -> Fields:
    """The node for a value added as a whole: a member (``.``) with its leaves."""
    if not _walk(value, t):
        return {}
    # A built-in struct added as a whole is reported through its fields only (its Go
    # zero value exists on the other side), each of them as added: its maps are members
    # themselves (omitempty: absent from the zero value); its lists only through their
    # items (a list the zero value writes as null, such as a PodSpec's containers, is no
    # member; an optional one would be: the schema does not say which, see the docs).
    # Maps, list items and the structs of custom resources (unstructured: nothing
    # exists before) are members themselves.
    if t is not None and t.kind == STRUCT and not t.go.startswith("map["):
        fields = t.fields()
        out: Fields = {}
        for k, v in value.items():
            ct = fields.get(k)
            if ct is not None and ct.kind == LIST:
                node = dict(_kids(_whole(v, ct)))  # its items, not the list itself
            else:
                node = _subtree(v, ct)
            if node or not (ct is not None and ct.kind == STRUCT and _walk(v, ct)):
                out[f"f:{k}"] = node
        return out
    return _whole(value, t)


def _whole(value: Any, t: TypeNode | None) -> Fields:
    """A value added where nothing was (the old side has no such key or item): it and
    every map, list and struct in it are members (the compare walk finds each one absent
    on the old side), its scalars leaves."""
    w = _walk(value, t)
    if w == 1:
        fields = t.fields() if t is not None and t.kind == STRUCT else None
        elem = t.elem if t is not None and t.kind == MAP else None
        out: Fields = {}
        for k, v in value.items():
            ct = fields.get(k) if fields is not None else elem
            out[f"f:{k}"] = _whole(v, ct)
        return _make(True, out)
    if w == 2:
        assert t is not None
        items: Fields = {}
        for item in value:
            element = _item_element(item, t)
            if element is not None:
                items[element] = _whole(item, t.elem)
        return _make(True, items)
    return {}


@dataclass(slots=True)
class Comparison:
    """What changed between two objects: added, modified and removed fields."""

    added: Fields
    modified: Fields
    removed: Fields


def compare(old: Any, new: Any, t: TypeNode | None) -> Comparison:
    """``TypedValue.Compare``: the fields ``new`` added, changed or removed from ``old``."""
    out = Comparison({}, {}, {})
    _compare(old, new, t, out)
    return out


def _compare(old: Any, new: Any, t: TypeNode | None, out: Comparison) -> None:
    w = _walk(new, t)
    if w == 1 and isinstance(old, dict):
        fields = t.fields() if t is not None and t.kind == STRUCT else None
        elem = t.elem if t is not None and t.kind == MAP else None
        for k, nv in new.items():
            element = f"f:{k}"
            ct = fields.get(k) if fields is not None else elem
            if k not in old:
                out.added[element] = _subtree(nv, ct)
                continue
            ov = old[k]
            if ov != nv:
                _compare_child(element, ov, nv, ct, out)
        for k in old:
            if k not in new:
                out.removed[f"f:{k}"] = _subtree(
                    old[k], fields.get(k) if fields is not None else elem
                )
        return
    if w == 2 and isinstance(old, list):
        assert t is not None
        old_items = {_item_element(i, t): i for i in old}
        new_items = {_item_element(i, t): i for i in new}
        for new_element, nv in new_items.items():
            if new_element is None:
                continue
            element = new_element
            if element not in old_items:
                out.added[element] = _whole(nv, t.elem)
            elif old_items[element] != nv:
                _compare_child(element, old_items[element], nv, t.elem, out)
        for old_element, ov in old_items.items():
            if old_element is not None and old_element not in new_items:
                sub = to_set(ov, t.elem) if _is_map(ov, t.elem) else {}
                out.removed[old_element] = _make(True, sub)


def _compare_child(element: str, ov: Any, nv: Any, ct: TypeNode | None, out: Comparison) -> None:
    if (_is_map(ov, ct) and _is_map(nv, ct)) or (
        _is_granular_list(ov, ct) and _is_granular_list(nv, ct)
    ):
        inner = Comparison({}, {}, {})
        _compare(ov, nv, ct, inner)
        if inner.added:
            out.added[element] = inner.added
        if inner.modified:
            out.modified[element] = inner.modified
        if inner.removed:
            out.removed[element] = inner.removed
    else:
        out.modified[element] = {}


def merge(live: Any, config: Any, t: TypeNode | None) -> Any:
    """``TypedValue.Merge``: ``config`` over ``live`` by the schema's merge semantics."""
    if _is_map(live, t) and _is_map(config, t):
        out = dict(live)
        for k, v in config.items():
            out[k] = merge(live[k], v, _child_type(t, k)) if k in live else v
        return out
    if _is_granular_list(live, t) and _is_granular_list(config, t):
        assert t is not None
        index = {_item_element(i, t): n for n, i in enumerate(live)}
        result = list(live)
        for item in config:
            element = _item_element(item, t)
            pos = index.get(element) if element is not None else None
            if pos is None:
                result.append(item)
                if element is not None:
                    index[element] = len(result) - 1
            elif t.list_type == "map":
                result[pos] = merge(result[pos], item, t.elem)
        return result
    return config


def _named(t: TypeNode | None, key: str) -> bool:
    return t is not None and t.kind == STRUCT and key in t.fields()


def _emptied(before: Any, after: Any) -> bool:
    return isinstance(after, dict | list) and not after and bool(before)


def prune(value: Any, last: Fields, managed: Fields, t: TypeNode | None) -> Any:
    """``value`` without what an applier applied last time and nobody manages now.

    structured-merge-diff's ``Updater.prune`` (removal of the last applied set, then
    ``addBackOwnedItems`` and ``addBackDanglingItems``), in one walk: a path goes when it
    is in ``last`` and not in ``managed`` (every manager's set, this apply's included),
    where a struct's named field counts as a member of a set that holds anything below it
    (``EnsureNamedFieldsAreMembers``). So a map the applier owned as a whole stays while
    it still applies a key of it, and only its other keys go. A map or list that loses
    all it had is dropped (``RemoveItems`` leaves it null, Go omits it). Returns
    ``value`` itself when nothing goes.
    """
    if not last:
        return value
    w = _walk(value, t)
    if w == 1:
        out: JsonDict = {}
        changed = False
        for k, v in value.items():
            element = f"f:{k}"
            last_node = last.get(element)
            if last_node is None:
                out[k] = v
                continue
            named = _named(t, k)
            mine = managed.get(element)
            if (_member(last_node) or named) and not (
                mine is not None and (_member(mine) or named)
            ):
                changed = True
                continue
            kept = prune(v, dict(_kids(last_node)), dict(_kids(mine or {})), _child_type(t, k))
            if kept is not v:
                changed = True
                if _emptied(v, kept):
                    continue
            out[k] = kept
        return out if changed else value
    if w == 2:
        assert t is not None
        items = []
        changed = False
        for item in value:
            item_element = _item_element(item, t)
            last_node = last.get(item_element) if item_element is not None else None
            if last_node is None or item_element is None:
                items.append(item)
                continue
            mine = managed.get(item_element)
            if _member(last_node) and not (mine is not None and _member(mine)):
                changed = True
                continue
            kept = prune(item, dict(_kids(last_node)), dict(_kids(mine or {})), t.elem)
            changed = changed or kept is not item
            items.append(kept)
        return items if changed else value
    return value


def undeclared(value: Any, t: TypeNode | None, path: str = "") -> list[str]:
    """``path: field not declared in schema`` for every field the schema lacks, as the
    typed conversion of an applied configuration reports them (SMD path syntax)."""
    out: list[str] = []
    if t is None or (t.preserve and t.kind != STRUCT):
        return out
    if t.kind == STRUCT and isinstance(value, dict) and not t.atomic:
        fields = t.fields()
        for k in sorted(value):
            child = f"{path}.{k}"
            ft = fields.get(k)
            if ft is None:
                if not t.preserve:
                    out.append(f"{child}: field not declared in schema")
                continue
            out.extend(undeclared(value[k], ft, child))
    elif t.kind == MAP and isinstance(value, dict) and not t.atomic:
        for k in sorted(value):
            out.extend(undeclared(value[k], t.elem, f"{path}.{k}"))
    elif t.kind == LIST and isinstance(value, list):
        for i, item in enumerate(value):
            element = _item_element(item, t) if t.list_type != "atomic" else None
            out.extend(
                undeclared(item, t.elem, path + (path_string((element,)) if element else f"[{i}]"))
            )
    return out


# --- managers ---------------------------------------------------------------------------


_clock: list[Any] = [0, ""]  # (second, its text): one strftime per second, not per write


def now() -> str:
    """``metav1.Time`` of now, as managedFields carry it (seconds, UTC)."""
    second = int(time.time())
    if _clock[0] != second:
        text = dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _clock[0], _clock[1] = second, text
    return str(_clock[1])


def _identity(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    op = str(entry.get("operation") or "")
    version = "" if op == "Apply" else str(entry.get("apiVersion") or "")
    return (str(entry.get("manager") or ""), op, version, str(entry.get("subresource") or ""))


def _sort(entries: list[JsonDict]) -> list[JsonDict]:
    """kube's order: operation, time (RFC 3339 seconds sort as text), manager, version."""
    if len(entries) < 2:
        return entries

    def key(e: JsonDict) -> tuple[str, str, str, str, str]:
        return (
            str(e.get("operation") or ""),
            str(e.get("time") or ""),
            str(e.get("manager") or ""),
            str(e.get("apiVersion") or ""),
            str(e.get("subresource") or ""),
        )

    return sorted(entries, key=key)


def _strip(fields: Fields) -> Fields:
    """A set without what stripmeta.go never tracks (apiVersion, kind, identity metadata)."""
    if "f:apiVersion" not in fields and "f:kind" not in fields and "f:metadata" not in fields:
        return fields
    out = {k: v for k, v in fields.items() if k not in ("f:apiVersion", "f:kind")}
    meta = out.get("f:metadata")
    if meta is not None:
        kept = {k: v for k, v in meta.items() if k[2:] not in _STRIPPED_META and k != DOT}
        if kept:
            out["f:metadata"] = kept
        else:
            del out["f:metadata"]
    return out


def _scope(fields: Fields, subresource: str | None, has_status: bool) -> Fields:
    """The part of a change a write may own (kube's reset fields per subresource)."""
    if subresource == "status":
        return {k: v for k, v in fields.items() if k in ("f:status", "f:metadata")}
    if has_status and "f:status" in fields:
        return {k: v for k, v in fields.items() if k != "f:status"}
    return fields


def _body(obj: Mapping[str, Any]) -> JsonDict:
    """The object as the field manager sees it (no managedFields)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return dict(obj)


def record_update(
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any],
    entries: list[JsonDict],
    *,
    manager: str,
    api_version: str,
    t: TypeNode | None,
    subresource: str | None = None,
    has_status: bool = False,
) -> list[JsonDict]:
    """The managedFields after a non-apply write turned ``old`` (None: create) into ``new``.

    The writer's ``Update`` entry takes every added or changed field from the others;
    removed fields leave every entry; emptied entries go. Without a change the entries
    come back as they were (and no time moves).
    """
    cmp = compare(_body(old) if old is not None else {}, _body(new), t)
    changed = _scope(_strip(union(cmp.added, cmp.modified)), subresource, has_status)
    removed = _strip(cmp.removed)
    if not changed and not removed:
        return entries
    ident = (manager, "Update", api_version, subresource or "")
    out: list[JsonDict] = []
    mine: Fields = {}
    for entry in entries:
        fields = entry.get("fieldsV1") or {}
        if _identity(entry) == ident:
            mine = fields
            continue
        kept = difference(difference(fields, changed), removed)
        if kept is fields:
            out.append(entry)
        elif kept:
            out.append({**entry, "fieldsV1": kept})
    if changed:
        mine = union(difference(difference(mine, removed), changed), changed)
        entry = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": mine,
        }
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    elif mine:
        kept = difference(mine, removed)
        if kept:
            previous = next(e for e in entries if _identity(e) == ident)
            out.append({**previous, "fieldsV1": kept})
    return _sort(_cap(out))


MAX_UPDATE_MANAGERS: Final = 10
_BUCKET: Final = "ancient-changes"


def _identity_text(entry: Mapping[str, Any]) -> str:
    """``BuildManagerIdentifier``'s JSON (the order capManagers breaks time ties by)."""
    ident: JsonDict = {"manager": entry.get("manager") or "", "operation": entry.get("operation")}
    if entry.get("operation") != "Apply" and entry.get("apiVersion"):
        ident["apiVersion"] = entry["apiVersion"]
    if entry.get("subresource"):
        ident["subresource"] = entry["subresource"]
    return orjson.dumps(ident).decode()


def _cap(entries: list[JsonDict]) -> list[JsonDict]:
    """``capManagersManager``: beyond ten Update entries, the oldest merge per apiVersion
    into an ``ancient-changes`` entry."""
    updaters = [e for e in entries if e.get("operation") == "Update"]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return entries
    updaters.sort(key=lambda e: (str(e.get("time") or ""), _identity_text(e)))
    gone: set[int] = set()
    first: dict[str, JsonDict] = {}
    buckets: dict[str, JsonDict] = {  # copies: stored entries are never changed
        str(e.get("apiVersion")): dict(e) for e in updaters if e.get("manager") == _BUCKET
    }
    length = len(updaters)
    for entry in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        version = str(entry.get("apiVersion") or "")
        if version not in first:
            first[version] = entry
            continue
        bucket = buckets.get(version)
        if bucket is None:
            seed = first[version]
            gone.add(id(seed))
            bucket = {**seed, "manager": _BUCKET}
            bucket.pop("subresource", None)
            buckets[version] = bucket
        bucket["fieldsV1"] = union(entry.get("fieldsV1") or {}, bucket.get("fieldsV1") or {})
        bucket["time"] = entry.get("time")
        gone.add(id(entry))
        length -= 1
    kept = [e for e in entries if id(e) not in gone and e.get("manager") != _BUCKET]
    return kept + list(buckets.values())


@dataclass(frozen=True, slots=True)
class Conflict:
    """One field another manager owns and an apply would change."""

    manager: str
    path: str


class ConflictError(Exception):
    """Apply conflicts (kube: 409 Conflict, one ``FieldManagerConflict`` cause each)."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        super().__init__(self.message())

    def message(self) -> str:
        cs = self.conflicts
        if len(cs) == 1:
            return f"Apply failed with 1 conflict: conflict with {cs[0].manager}: {cs[0].path}"
        by_manager: dict[str, list[str]] = {}
        for c in cs:
            by_manager.setdefault(c.manager, []).append(c.path)
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {p}" for p in by_manager[manager])
        return f"Apply failed with {len(cs)} conflicts: " + "\n".join(lines)


def _print_manager(entry: Mapping[str, Any]) -> str:
    """``printManager``: ``"name"``, with subresource and (updates) the apiVersion."""
    text = orjson.dumps(str(entry.get("manager") or "")).decode()
    if entry.get("subresource"):
        text += f" with subresource {orjson.dumps(entry['subresource']).decode()}"
    if entry.get("operation") == "Update":
        text += f" using {entry.get('apiVersion')}"
    return text


def apply(
    live: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    entries: list[JsonDict],
    *,
    manager: str,
    api_version: str,
    t: TypeNode | None,
    force: bool,
    subresource: str | None = None,
    has_status: bool = False,
    sent: Mapping[str, Any] | None = None,
) -> tuple[JsonDict, list[JsonDict]]:
    """Server-side apply of ``config`` onto ``live`` (None: the object does not exist).

    The ``kubectl`` manager upgrades client-side apply (lastappliedmanager.go and
    lastappliedupdater.go): its conflicts on fields the live last-applied annotation
    records, with the values recorded, are forced; after it applies, that annotation
    (where the object has one) becomes ``sent``, the configuration as the client sent it
    (``config`` by default).

    Returns:
        The new object (without managedFields) and its managedFields.

    Raises:
        ConflictError: another manager owns a field this apply changes, and not ``force``.
    """
    base = _body(live) if live is not None else {}
    if live is not None and not entries:
        # An object nobody owns yet (created before tracking, or its managedFields
        # reset): every field it has belongs to "before-first-apply", without a time.
        existing = _scope(_strip(to_set(base, t)), subresource, has_status)
        if existing:
            entries = [
                {
                    "manager": "before-first-apply",
                    "operation": "Update",
                    "apiVersion": api_version,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": existing,
                }
            ]
    applied = _scope(_strip(to_set(config, t)), subresource, has_status)
    merged = merge(base, dict(config), t)
    ident = (manager, "Apply", "", subresource or "")
    last: Fields = {}
    previous: JsonDict | None = None
    others: list[JsonDict] = []
    for entry in entries:
        if _identity(entry) == ident:
            previous = entry
            last = entry.get("fieldsV1") or {}
        else:
            others.append(entry)
    # Everything managed now; this apply's set whole (as ToFieldSet gives it to prune,
    # before stripmeta.go strips the entry): its metadata.name keeps metadata.
    owned = to_set(config, t)
    for entry in others:
        owned = union(owned, entry.get("fieldsV1") or {})
    merged = prune(merged, last, owned, t)
    cmp = compare(base, merged, t)
    changed = union(cmp.added, cmp.modified)
    clashes: list[tuple[str, tuple[str, ...]]] = []
    kept_others: list[JsonDict] = []
    for entry in others:
        fields = entry.get("fieldsV1") or {}
        clash = intersection(fields, changed)
        if clash:
            who = _print_manager(entry)
            clashes.extend((who, p) for p in leaves(clash))
            fields = difference(fields, clash)
        fields = difference(fields, cmp.removed)
        if fields:
            kept_others.append(
                entry if fields is entry.get("fieldsV1") else {**entry, "fieldsV1": fields}
            )
    if clashes and not force and manager == KUBECTL and live is not None:
        allowed = _allowed_by_last_applied(base, t, api_version)
        if allowed is not None:
            clashes = [c for c in clashes if not _has(allowed, c[1])]
    if clashes and not force:
        conflicts = sorted(
            (Conflict(who, path_string(p)) for who, p in clashes),
            key=lambda c: (c.manager, c.path),
        )
        raise ConflictError(conflicts)
    out = kept_others
    if applied:
        mine: JsonDict = {
            "manager": manager,
            "operation": "Apply",
            "apiVersion": api_version,
            # The time moves only when the object changed (managedFieldsUpdater.Apply).
            "time": now() if merged != base or previous is None else previous.get("time"),
            "fieldsType": "FieldsV1",
            "fieldsV1": applied,
        }
        if subresource:
            mine["subresource"] = subresource
        out.append(mine)
    if manager == KUBECTL:
        merged = _update_last_applied(merged, config if sent is None else sent)
    return merged, _sort(out)


# --- the upgrade from client-side apply ------------------------------------------------

LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
KUBECTL: Final = "kubectl"  # the one manager the upgrade is for (kubectl's SSA default)
_ANNOTATIONS_LIMIT: Final = 256 * 1024  # bytes: ValidateAnnotationsSize


def _has(fields: Fields, path: tuple[str, ...]) -> bool:
    node: Fields | None = fields
    for element in path:
        node = node.get(element) if node is not None else None
        if node is None:
            return False
    return node is not None and _member(node)


def _allowed_by_last_applied(live: JsonDict, t: TypeNode | None, api_version: str) -> Fields | None:
    """The fields client-side apply may hand over (``allowedConflictsFromLastApplied``):
    those of the live last-applied annotation whose values the object still has. None
    when there is no usable annotation (absent, not JSON, another apiVersion, or not of
    the kind's schema)."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not isinstance(text, str) or not text:
        return None
    try:
        recorded = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(recorded, dict) or recorded.get("apiVersion") != api_version:
        return None
    if undeclared(recorded, t):
        return None
    cmp = compare(recorded, live, t)
    fields = to_set(recorded, t)
    return difference(difference(difference(fields, cmp.modified), cmp.added), cmp.removed)


def _go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes a map: sorted keys, no spaces, HTML-escaped."""

    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, float) and v.is_integer() and abs(v) < 1e21:
            return int(v)
        return v

    text = json.dumps(plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _update_last_applied(obj: JsonDict, sent: Mapping[str, Any]) -> JsonDict:
    """``lastAppliedUpdater``: an object carrying a last-applied annotation gets the
    applied configuration in it (its own annotation left out, encoded as the
    unstructured JSON scheme does, newline included); dropped when the annotations
    would outgrow their size limit."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if not annotations.get(LAST_APPLIED):
        return obj
    recorded = dict(sent)
    sent_meta = recorded.get("metadata")
    if isinstance(sent_meta, dict) and isinstance(sent_meta.get("annotations"), dict):
        rest = {k: v for k, v in sent_meta["annotations"].items() if k != LAST_APPLIED}
        recorded["metadata"] = {**sent_meta, "annotations": rest}
    updated = {**annotations, LAST_APPLIED: _go_json(recorded) + "\n"}
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in updated.items())
    if size > _ANNOTATIONS_LIMIT:
        updated.pop(LAST_APPLIED)
    return {**obj, "metadata": {**meta, "annotations": updated}}


def type_of(
    group: str, version: str, kind: str, crd_schema: Mapping[str, Any] | None, custom: bool
) -> TypeNode | None:
    """The type the field manager walks for one resource."""
    if custom:
        return typeinfo.from_crd_schema(crd_schema)
    return typeinfo.builtin(group, version, kind)
