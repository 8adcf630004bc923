"""Read-only JSON containers: what the informer cache holds (controller-runtime copies
every object a cache read returns; here the cached object itself is read-only instead).

Every object enters an informer's cache through its reflector, which converts it with
:func:`freeze_in_place` once, after the transform: list pages, watch events, relists,
sharded segments alike. What the cache then gives out (listers, event handlers, predicates,
index functions, tombstones) is one shared :class:`FrozenDict` whose every nested dict
is a :class:`FrozenDict` and every nested list a :class:`FrozenList`. They are ``dict``
and ``list`` subclasses, so everything that reads a decoded object keeps working:
``isinstance(obj, dict)``, ``obj["metadata"]``, ``.get``, iteration, ``==`` with plain
dicts and lists, ``json.dumps``, ``orjson.dumps``, ``dict(obj)``, ``{**obj}``, ``obj | x``,
``obj.copy()``, slicing, pickling. What would change them raises :class:`TypeError`
saying what to do instead: item assignment and deletion, ``update``, ``pop``,
``popitem``, ``setdefault``, ``clear``, ``|=``; ``append``, ``extend``, ``insert``,
``remove``, ``sort``, ``reverse``, ``+=``, ``*=``, slice assignment.

Copies are plain: ``copy.deepcopy(obj)`` and :func:`thaw` give a plain deep copy, free to
change; ``copy.copy(obj)``, ``obj.copy()``, ``dict(obj)`` and ``{**obj}`` a plain
*shallow* one (its top level may change; what it holds is still the cache's, read-only).
The usual way to build a change: ``new = thaw(obj)``, edit ``new``, write it.

Not a sandbox: ``dict.__setitem__(obj, k, v)`` still writes (nothing in Python can stop
that); what is refused is every ordinary way of changing an object by accident.

Unchanged parts are shared: the conversion may be given the version already cached
(``like``); every nested dict or list equal to the one at the same place there is taken
from it rather than converted again. A watch event mostly changes ``metadata`` and
``status``, so an update converts only those; the comparisons run in C. Sharing is safe
because what is shared cannot change.

Thread-safe: frozen containers are never written after :func:`freeze` returns them.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

from manager.keys import JsonDict

__all__ = ["FrozenDict", "FrozenList", "freeze", "freeze_in_place", "thaw"]

HOW = (
    "objects from the cache are read-only (shared by every reader of the cache): "
    "copy.deepcopy(obj) (or manager.thaw(obj)) and change the copy; write to the API server"
)


def _refuse(what: str, kind: str) -> NoReturn:
    raise TypeError(f"{what} on a read-only {kind}: {HOW}")


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses every change (see the module docstring).

    Built by :func:`freeze`; ``FrozenDict(mapping)`` is a shallow read-only copy.
    """

    __slots__ = ()

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        _refuse(f"setting [{key!r}]", "dict")

    def __delitem__(self, key: str) -> NoReturn:
        _refuse(f"deleting [{key!r}]", "dict")

    def __ior__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        _refuse("|=", "dict")

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("update()", "dict")

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("pop()", "dict")

    def popitem(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("popitem()", "dict")

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("setdefault()", "dict")

    def clear(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("clear()", "dict")

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> dict[str, Any]:
        return _thaw_dict(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_dict, (dict(self),))


class FrozenList(list[Any]):
    """A ``list`` that refuses every change (see the module docstring).

    Built by :func:`freeze`; ``FrozenList(iterable)`` is a shallow read-only copy.
    """

    __slots__ = ()

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        _refuse(f"setting [{index!r}]", "list")

    def __delitem__(self, index: Any) -> NoReturn:
        _refuse(f"deleting [{index!r}]", "list")

    def __iadd__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        _refuse("+=", "list")

    def __imul__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        _refuse("*=", "list")

    def append(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("append()", "list")

    def extend(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("extend()", "list")

    def insert(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("insert()", "list")

    def remove(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("remove()", "list")

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("pop()", "list")

    def clear(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("clear()", "list")

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("sort()", "list")

    def reverse(self, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse("reverse()", "list")

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> list[Any]:
        return _thaw_list(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_list, (list(self),))


def _restore_dict(items: dict[str, Any]) -> FrozenDict:
    return FrozenDict(items)


def _restore_list(items: list[Any]) -> FrozenList:
    return FrozenList(items)


# -- freeze ------------------------------------------------------------------------------
# The hot path: once per object entering a cache. Written for CPython's speed: exact type
# checks (a frozen child is kept as it is), children replaced in the caller's containers
# (the decoded object is the reflector's own), then one C-level copy into the subclass.


def _new_dict(d: dict[str, Any]) -> FrozenDict:
    for k, v in d.items():
        t = type(v)
        if t is dict:
            d[k] = _new_dict(v)
        elif t is list:
            d[k] = _new_list(v)
    return FrozenDict(d)


def _new_list(items: list[Any]) -> FrozenList:
    for i, v in enumerate(items):
        t = type(v)
        if t is dict:
            items[i] = _new_dict(v)
        elif t is list:
            items[i] = _new_list(v)
    return FrozenList(items)


def _freeze_dict(d: dict[str, Any], like: Any) -> FrozenDict:
    """``d`` frozen, taking every part equal to ``like``'s at the same key from it."""
    if type(like) is not FrozenDict:
        return _new_dict(d)
    for k, v in d.items():
        t = type(v)
        if t is dict:
            old = like.get(k)
            d[k] = old if type(old) is FrozenDict and old == v else _freeze_dict(v, old)
        elif t is list:
            old = like.get(k)
            d[k] = old if type(old) is FrozenList and old == v else _freeze_list(v, old)
    return FrozenDict(d)


def _freeze_list(items: list[Any], like: Any) -> FrozenList:
    """``items`` frozen, taking every element equal to ``like``'s at the same index from
    it (``like`` of another length: nothing, an insertion shifts every index)."""
    if type(like) is not FrozenList or len(like) != len(items):
        return _new_list(items)
    for i, v in enumerate(items):
        t = type(v)
        if t is dict:
            old = like[i]
            items[i] = old if type(old) is FrozenDict and old == v else _freeze_dict(v, old)
        elif t is list:
            old = like[i]
            items[i] = old if type(old) is FrozenList and old == v else _freeze_list(v, old)
    return FrozenList(items)


def freeze_in_place(obj: JsonDict, like: JsonDict | None = None) -> JsonDict:
    """``obj`` read-only, consuming it: the fast path for a freshly decoded object that
    nobody else holds (the reflector's). ``obj``'s nested plain dicts and lists are
    replaced by frozen ones in place; don't use ``obj`` afterwards, use what is returned.

    ``like``: a frozen object (the version already cached) whose equal parts are shared.
    An object that is already a :class:`FrozenDict` is returned as it is.
    """
    if type(obj) is FrozenDict:
        return obj
    return _freeze_dict(obj, like)


def freeze(obj: JsonDict, like: JsonDict | None = None) -> JsonDict:
    """A read-only deep copy of ``obj``, as the cache holds objects (``obj`` is left as it
    was). For tests that hand a reconciler what a lister would: a change to it raises.

    ``like``: a frozen object whose equal parts are shared rather than copied.
    """
    if type(obj) is FrozenDict:
        return obj
    return _freeze_dict(_thaw_dict(obj), like)


# -- thaw --------------------------------------------------------------------------------

_ATOMIC = frozenset((str, int, float, bool, type(None)))


def _thaw_value(v: Any) -> Any:
    t = type(v)
    if t in _ATOMIC:
        return v
    if isinstance(v, dict):
        return _thaw_dict(v)
    if isinstance(v, list):
        return _thaw_list(v)
    return copy.deepcopy(v)


def _thaw_dict(d: dict[str, Any]) -> dict[str, Any]:
    out = dict(d)
    for k, v in out.items():
        if type(v) not in _ATOMIC:
            out[k] = _thaw_value(v)
    return out


def _thaw_list(items: list[Any]) -> list[Any]:
    out = list(items)
    for i, v in enumerate(out):
        if type(v) not in _ATOMIC:
            out[i] = _thaw_value(v)
    return out


def thaw(obj: JsonDict) -> JsonDict:
    """A plain deep copy of ``obj`` (a cached object, or any JSON-like dict): every dict
    and list in it is a new, plain, changeable one. The same as ``copy.deepcopy(obj)``,
    faster. Build a change to a cached object on this, then write it to the API server."""
    return _thaw_dict(obj)
