"""Predicates: filter informer events before they become requests (controller-runtime
``pkg/predicate``).

A predicate answers, per event, whether it should be enqueued. Controllers combine them
with :func:`all_of`, :func:`any_of` and :func:`not_`. Objects are the cached dicts.

Thread-safe: predicates are pure functions of their arguments.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from manager.keys import JsonDict
from manager.labels import LabelSelector

__all__ = [
    "AnnotationChanged",
    "Funcs",
    "GenerationChanged",
    "LabelChanged",
    "LabelSelectorPredicate",
    "Predicate",
    "ResourceVersionChanged",
    "all_of",
    "any_of",
    "not_",
]


class Predicate(Protocol):
    """Whether an event should reach the workqueue."""

    def create(self, obj: JsonDict) -> bool: ...

    def update(self, old: JsonDict, new: JsonDict) -> bool: ...

    def delete(self, obj: JsonDict) -> bool: ...


def _meta(obj: JsonDict) -> Mapping[str, object]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True, slots=True)
class Funcs:
    """A predicate from optional functions; a missing function lets the event through."""

    on_create: Callable[[JsonDict], bool] | None = None
    on_update: Callable[[JsonDict, JsonDict], bool] | None = None
    on_delete: Callable[[JsonDict], bool] | None = None

    def create(self, obj: JsonDict) -> bool:
        return self.on_create is None or self.on_create(obj)

    def update(self, old: JsonDict, new: JsonDict) -> bool:
        return self.on_update is None or self.on_update(old, new)

    def delete(self, obj: JsonDict) -> bool:
        return self.on_delete is None or self.on_delete(obj)


class _UpdateOnly(ABC):
    """Base: creates and deletes pass; updates are judged by ``changed``."""

    def create(self, obj: JsonDict) -> bool:
        return True

    def delete(self, obj: JsonDict) -> bool:
        return True

    def update(self, old: JsonDict, new: JsonDict) -> bool:
        return self.changed(_meta(old), _meta(new))

    @abstractmethod
    def changed(self, old: Mapping[str, object], new: Mapping[str, object]) -> bool:
        """Whether the update changed what this predicate watches."""


class ResourceVersionChanged(_UpdateOnly):
    """Drops resync updates (same resourceVersion)."""

    def changed(self, old: Mapping[str, object], new: Mapping[str, object]) -> bool:
        return old.get("resourceVersion") != new.get("resourceVersion")


class GenerationChanged(_UpdateOnly):
    """Passes updates that changed ``metadata.generation`` (spec changes), not status-only."""

    def changed(self, old: Mapping[str, object], new: Mapping[str, object]) -> bool:
        return old.get("generation") != new.get("generation")


class AnnotationChanged(_UpdateOnly):
    """Passes updates that changed the annotations."""

    def changed(self, old: Mapping[str, object], new: Mapping[str, object]) -> bool:
        return (old.get("annotations") or {}) != (new.get("annotations") or {})


class LabelChanged(_UpdateOnly):
    """Passes updates that changed the labels."""

    def changed(self, old: Mapping[str, object], new: Mapping[str, object]) -> bool:
        return (old.get("labels") or {}) != (new.get("labels") or {})


class LabelSelectorPredicate:
    """Passes events for objects whose labels match (updates: either side matches)."""

    def __init__(self, selector: LabelSelector | str) -> None:
        self._selector = LabelSelector.parse(selector) if isinstance(selector, str) else selector

    def _ok(self, obj: JsonDict) -> bool:
        labels = _meta(obj).get("labels")
        return self._selector.matches(labels if isinstance(labels, dict) else {})

    def create(self, obj: JsonDict) -> bool:
        return self._ok(obj)

    def update(self, old: JsonDict, new: JsonDict) -> bool:
        return self._ok(old) or self._ok(new)

    def delete(self, obj: JsonDict) -> bool:
        return self._ok(obj)


@dataclass(frozen=True, slots=True)
class _All:
    preds: tuple[Predicate, ...]

    def create(self, obj: JsonDict) -> bool:
        return all(p.create(obj) for p in self.preds)

    def update(self, old: JsonDict, new: JsonDict) -> bool:
        return all(p.update(old, new) for p in self.preds)

    def delete(self, obj: JsonDict) -> bool:
        return all(p.delete(obj) for p in self.preds)


@dataclass(frozen=True, slots=True)
class _Any:
    preds: tuple[Predicate, ...]

    def create(self, obj: JsonDict) -> bool:
        return any(p.create(obj) for p in self.preds)

    def update(self, old: JsonDict, new: JsonDict) -> bool:
        return any(p.update(old, new) for p in self.preds)

    def delete(self, obj: JsonDict) -> bool:
        return any(p.delete(obj) for p in self.preds)


@dataclass(frozen=True, slots=True)
class _Not:
    pred: Predicate

    def create(self, obj: JsonDict) -> bool:
        return not self.pred.create(obj)

    def update(self, old: JsonDict, new: JsonDict) -> bool:
        return not self.pred.update(old, new)

    def delete(self, obj: JsonDict) -> bool:
        return not self.pred.delete(obj)


def all_of(*preds: Predicate) -> Predicate:
    """Passes when every predicate passes."""
    return _All(preds)


def any_of(*preds: Predicate) -> Predicate:
    """Passes when at least one predicate passes."""
    return _Any(preds)


def not_(pred: Predicate) -> Predicate:
    """Passes when ``pred`` does not."""
    return _Not(pred)
