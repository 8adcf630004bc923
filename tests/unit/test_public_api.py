"""``manager.__all__`` is the public API: sorted, complete, and every name resolves."""

from __future__ import annotations

import types

import manager


def _rank(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    return (1, name) if name[0].isupper() else (2, name)


def test_all_is_sorted_and_unique() -> None:
    assert manager.__all__ == sorted(set(manager.__all__), key=_rank)


def test_every_exported_name_resolves() -> None:
    for name in manager.__all__:
        assert getattr(manager, name, None) is not None, name


def test_nothing_public_is_left_out() -> None:
    public = {
        name
        for name, value in vars(manager).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert public == set(manager.__all__)
