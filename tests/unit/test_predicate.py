"""Predicates (controller-runtime ``pkg/predicate``): which events reach the workqueue.

Update-only predicates let creates and deletes through and judge updates by one
metadata field; the label selector predicate judges every event by the labels; Funcs
builds one from functions; all_of/any_of/not_ combine them."""

from __future__ import annotations

from typing import Any

import pytest

from manager.keys import JsonDict
from manager.labels import LabelSelector
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


def obj(**meta: Any) -> JsonDict:
    m: JsonDict = {"name": "d", "namespace": "ns", "resourceVersion": "1", "generation": 1}
    m.update(meta)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": m}


# -- update-only predicates ----------------------------------------------------------

UPDATE_ONLY: list[Predicate] = [
    ResourceVersionChanged(),
    GenerationChanged(),
    AnnotationChanged(),
    LabelChanged(),
]


@pytest.mark.parametrize("pred", UPDATE_ONLY, ids=lambda p: type(p).__name__)
def test_update_only_predicates_pass_creates_and_deletes(pred: Predicate) -> None:
    assert pred.create(obj())
    assert pred.delete(obj())
    assert pred.create({})  # even a shapeless object


@pytest.mark.parametrize(
    ("pred", "old", "new", "expected"),
    [
        # resourceVersion: a resync (same rv) is dropped, a real change passes
        (ResourceVersionChanged(), obj(), obj(), False),
        (ResourceVersionChanged(), obj(resourceVersion="1"), obj(resourceVersion="2"), True),
        # generation: a status-only write bumps rv but not generation
        (GenerationChanged(), obj(resourceVersion="1"), obj(resourceVersion="2"), False),
        (GenerationChanged(), obj(generation=1), obj(generation=2), True),
        (GenerationChanged(), obj(generation=None), obj(generation=None), False),
        # annotations: value change, addition, removal pass; a missing map equals {}
        (AnnotationChanged(), obj(annotations={"a": "1"}), obj(annotations={"a": "1"}), False),
        (AnnotationChanged(), obj(annotations={"a": "1"}), obj(annotations={"a": "2"}), True),
        (AnnotationChanged(), obj(), obj(annotations={"a": "1"}), True),
        (AnnotationChanged(), obj(annotations={"a": "1"}), obj(), True),
        (AnnotationChanged(), obj(), obj(annotations={}), False),
        (AnnotationChanged(), obj(annotations={"a": "1"}), obj(labels={"a": "2"}), True),
        (AnnotationChanged(), obj(labels={"x": "1"}), obj(labels={"x": "2"}), False),
        # labels: likewise, and blind to annotations
        (LabelChanged(), obj(labels={"app": "web"}), obj(labels={"app": "web"}), False),
        (LabelChanged(), obj(labels={"app": "web"}), obj(labels={"app": "api"}), True),
        (LabelChanged(), obj(), obj(labels={"app": "web"}), True),
        (LabelChanged(), obj(labels={"app": "web"}), obj(labels=None), True),
        (LabelChanged(), obj(labels=None), obj(labels={}), False),
        (LabelChanged(), obj(annotations={"a": "1"}), obj(annotations={"a": "2"}), False),
    ],
)
def test_update_only_predicates_judge_updates(
    pred: Predicate, old: JsonDict, new: JsonDict, expected: bool
) -> None:
    assert pred.update(old, new) is expected


def test_update_only_predicates_tolerate_missing_metadata() -> None:
    for pred in UPDATE_ONLY:
        assert pred.update({}, {}) is False
        assert pred.update({"metadata": None}, {"metadata": "junk"}) is False


# -- LabelSelectorPredicate ------------------------------------------------------------


@pytest.mark.parametrize(
    "selector", ["app=web,tier!=db", LabelSelector.parse("app=web,tier!=db")], ids=["str", "parsed"]
)
def test_label_selector_predicate_create_and_delete(selector: str | LabelSelector) -> None:
    pred = LabelSelectorPredicate(selector)
    assert pred.create(obj(labels={"app": "web"}))
    assert pred.delete(obj(labels={"app": "web", "tier": "front"}))
    assert not pred.create(obj(labels={"app": "web", "tier": "db"}))
    assert not pred.delete(obj(labels={"app": "api"}))
    assert not pred.create(obj())  # no labels at all
    assert not pred.create(obj(labels=None))


def test_label_selector_predicate_update_passes_when_either_side_matches() -> None:
    pred = LabelSelectorPredicate("app=web")
    web, api = obj(labels={"app": "web"}), obj(labels={"app": "api"})
    assert pred.update(web, web)
    assert pred.update(api, web)  # started matching
    assert pred.update(web, api)  # stopped matching: the reconciler must still hear of it
    assert not pred.update(api, api)


def test_label_selector_predicate_empty_selector_matches_everything() -> None:
    pred = LabelSelectorPredicate("")
    assert pred.create(obj())
    assert pred.update(obj(), obj())
    assert pred.delete({})


def test_label_selector_predicate_rejects_a_bad_selector() -> None:
    with pytest.raises(ValueError, match=r"."):
        LabelSelectorPredicate("app in (web")


# -- Funcs -----------------------------------------------------------------------------


def test_funcs_without_functions_pass_everything() -> None:
    pred = Funcs()
    assert pred.create(obj()) and pred.update(obj(), obj()) and pred.delete(obj())


def test_funcs_call_each_function_with_the_event_objects() -> None:
    calls: list[tuple[str, Any]] = []
    a, b = obj(resourceVersion="1"), obj(resourceVersion="2")

    def record(event: str, args: Any) -> bool:
        calls.append((event, args))
        return False

    pred = Funcs(
        on_create=lambda o: record("create", o),
        on_update=lambda o, n: record("update", (o, n)),
        on_delete=lambda o: record("delete", o),
    )
    assert not pred.create(a)
    assert not pred.update(a, b)
    assert not pred.delete(b)
    assert calls == [("create", a), ("update", (a, b)), ("delete", b)]


def test_funcs_missing_function_lets_that_event_through() -> None:
    pred = Funcs(on_update=lambda o, n: False)
    assert pred.create(obj())
    assert not pred.update(obj(), obj())
    assert pred.delete(obj())


# -- combinators -----------------------------------------------------------------------

YES = Funcs()
NO = Funcs(lambda o: False, lambda o, n: False, lambda o: False)


def _all_events(pred: Predicate) -> tuple[bool, bool, bool]:
    return pred.create(obj()), pred.update(obj(), obj()), pred.delete(obj())


@pytest.mark.parametrize(
    ("pred", "expected"),
    [
        (all_of(YES, YES), True),
        (all_of(YES, NO), False),
        (all_of(NO, YES), False),
        (all_of(), True),
        (any_of(NO, YES), True),
        (any_of(NO, NO), False),
        (any_of(), False),
        (not_(YES), False),
        (not_(NO), True),
        (not_(all_of(YES, NO)), True),
        (any_of(all_of(YES, NO), not_(NO)), True),
    ],
)
def test_combinators_apply_to_every_event_type(pred: Predicate, expected: bool) -> None:
    assert _all_events(pred) == (expected, expected, expected)


def test_combinators_mix_event_types_per_predicate() -> None:
    # "spec or labels changed" — the usual reason to combine
    pred = any_of(GenerationChanged(), LabelChanged())
    assert pred.update(obj(generation=1), obj(generation=2))
    assert pred.update(obj(labels={"a": "1"}), obj(labels={"a": "2"}))
    assert not pred.update(obj(resourceVersion="1"), obj(resourceVersion="2"))
    # "labelled app=web and not a resync"
    web = all_of(LabelSelectorPredicate("app=web"), ResourceVersionChanged())
    assert web.create(obj(labels={"app": "web"}))
    assert not web.create(obj(labels={"app": "api"}))
    assert not web.update(obj(labels={"app": "web"}), obj(labels={"app": "web"}))
    assert web.update(obj(labels={"app": "web"}), obj(labels={"app": "web"}, resourceVersion="2"))
    # not_ inverts creates and deletes of an update-only predicate as well
    assert not not_(GenerationChanged()).create(obj())
    assert not_(GenerationChanged()).update(obj(), obj())
