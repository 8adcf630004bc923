"""The test kit's pieces that need no API server: ``eventually``, ``validate_section``,
plugin names, and a configuration refused before anything starts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from manager import Manager, NotFound, PluginContext
from manager.errors import ConfigError
from manager.testing import eventually, plugin_name, run_manager, run_plugin, validate_section


@dataclass(frozen=True, kw_only=True, slots=True)
class TeamConfig:
    label: str = field(default="team", metadata={"help": "the Namespace label"})
    replicas: int = field(default=1, metadata={"min": 1})

    def validate(self) -> list[str]:
        return [] if self.label.strip() else ["must name a label"]


class TeamInfoPlugin:
    config_class = TeamConfig

    def setup(self, mgr: Manager, ctx: PluginContext[TeamConfig]) -> None:
        raise AssertionError("not called")


def make_plugin() -> TeamInfoPlugin:
    return TeamInfoPlugin()


def test_eventually_returns_the_first_truthy_value() -> None:
    calls = iter([None, 0, "", "done", "later"])
    assert eventually(lambda: next(calls), interval=0) == "done"


def test_eventually_treats_assertion_errors_and_not_found_as_not_yet() -> None:
    seen = []

    def check() -> int:
        seen.append(1)
        if len(seen) == 1:
            raise NotFound('configmaps "x" not found')
        assert len(seen) > 2, "not three yet"
        return len(seen)

    assert eventually(check, interval=0) == 3


def test_eventually_fails_at_once_on_any_other_exception() -> None:
    def check() -> bool:
        raise KeyError("a bug in the check")

    with pytest.raises(KeyError):
        eventually(check, timeout=60)


def test_eventually_says_what_it_waited_for_and_what_it_saw_last() -> None:
    data: dict[str, Any] = {"owner": "nobody"}
    with pytest.raises(AssertionError) as info:
        eventually(lambda: data["owner"] == "payments", timeout=0.05, interval=0.01)
    # the lambda's own source, and the compared values as pytest shows them (issue 22)
    assert str(info.value) == (
        'not within 0.05 s: lambda: data["owner"] == "payments"; last returned False: '
        "'nobody' == 'payments'"
    )
    items = [1, 2]
    with pytest.raises(AssertionError) as info:
        eventually(
            lambda: len(items) >= 3,
            timeout=0.02,
            interval=0.01,
        )
    assert str(info.value) == (
        "not within 0.02 s: lambda: len(items) >= 3; last returned False: 2 >= 3"
    )
    with pytest.raises(AssertionError) as info:
        eventually(lambda: not items, timeout=0.02, interval=0.01)
    assert str(info.value) == "not within 0.02 s: lambda: not items; last returned False"

    def missing() -> bool:
        raise NotFound('configmaps "team-info" not found')

    with pytest.raises(AssertionError) as info:
        eventually(missing, timeout=0.05, interval=0.01, what="the ConfigMap")
    assert str(info.value) == (
        'not within 0.05 s: the ConfigMap; last raised NotFound: 404: configmaps "team-info" '
        "not found"
    )
    assert isinstance(info.value.__cause__, NotFound)


def test_validate_section_is_the_loader_with_its_paths() -> None:
    settings, own = validate_section(TeamInfoPlugin, "workers: 3\nlabel: squad\n")
    assert (settings.workers, settings.enabled, own) == (3, True, TeamConfig(label="squad"))
    assert validate_section(TeamInfoPlugin) == validate_section(TeamInfoPlugin(), {})
    with pytest.raises(ConfigError) as info:
        validate_section(TeamInfoPlugin, {"workers": 0, "lable": "x", "replicas": 0})
    assert info.value.problems == [
        "controllers.teaminfo.workers: expected integer >= 1 and <= 256, got 0",
        "controllers.teaminfo.lable: unknown key, did you mean label? (known keys: label, "
        "replicas)",
        "controllers.teaminfo.replicas: expected integer >= 1, got 0",
    ]
    with pytest.raises(ConfigError) as info:
        validate_section(TeamInfoPlugin, {"label": " "}, name="teams")
    assert info.value.problems == ["controllers.teams: must name a label"]


def test_plugin_names_follow_the_plugin_flag() -> None:
    assert plugin_name(TeamInfoPlugin) == "teaminfo"
    assert plugin_name(TeamInfoPlugin()) == "teaminfo"
    assert plugin_name(make_plugin) == "make_plugin"
    assert plugin_name("overseer_teaminfo:TeamInfoPlugin") == "teaminfo"
    assert plugin_name("x=overseer_teaminfo:TeamInfoPlugin") == "x"


def test_a_bad_configuration_starts_nothing() -> None:
    with pytest.raises(ConfigError) as info:  # noqa: SIM117 - the inner one must not run
        with run_plugin(TeamInfoPlugin, "/nonexistent/kubeconfig", {"replicas": 0}):
            raise AssertionError("not reached")
    assert info.value.problems == ["controllers.teaminfo.replicas: expected integer >= 1, got 0"]
    with pytest.raises(ConfigError) as info:  # noqa: SIM117
        with run_manager(
            "/nonexistent/kubeconfig", {"teaminfo": TeamInfoPlugin}, {"controllers": {"tm": {}}}
        ):
            raise AssertionError("not reached")
    assert info.value.problems == ["controllers.tm: unknown controller (installed: teaminfo)"]


def test_the_retired_namespace_keyword_says_what_it_did() -> None:
    """Issue 22, item 2: run_plugin(..., namespace=ns) silently meant "watch only ns"."""
    for run in (
        lambda: run_plugin(TeamInfoPlugin, "/nonexistent", namespace="ns"),
        lambda: run_manager("/nonexistent", {"teaminfo": TeamInfoPlugin}, namespace="ns"),
    ):
        with (
            pytest.raises(
                TypeError, match=r"now watch_namespace=: it makes the manager watch only"
            ),
            run(),
        ):
            pass


class _NoSettingsPlugin:
    """A plugin with nothing to configure: no config_class."""

    def setup(self, mgr: Manager, ctx: PluginContext[Any]) -> None:
        pass


def test_a_plugin_without_settings_needs_no_config_class() -> None:
    """Issue 22, item 7: config_class was required even for a plugin with no settings."""
    common, own = validate_section(_NoSettingsPlugin, {"workers": 2}, name="nosettings")
    assert common.workers == 2
    assert dataclasses.is_dataclass(own) and not dataclasses.fields(own)
    with pytest.raises(ConfigError) as info:
        validate_section(_NoSettingsPlugin, {"greeting": "hi"}, name="nosettings")
    assert any(
        p.startswith("controllers.nosettings.greeting: unknown") for p in info.value.problems
    ), info.value.problems


LOCAL_KNOB_TESTS = """
import pytest


@pytest.fixture
def first():
    # requested before local_server: it would run (and, on a real cluster, make things
    # there) before the skip if the skip waited for local_server's own setup
    raise AssertionError("a fixture of a local_only test ran against a real cluster")


@pytest.fixture
def knobs(local_server):
    return local_server


def test_uses_it(first, local_server):
    pass


def test_uses_it_through_another_fixture(first, knobs):
    pass


@pytest.mark.local_only
def test_marked():
    pass


def test_plain():
    pass
"""


def test_a_test_that_uses_local_server_is_local_only(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32, item 5: ``local_server`` (directly or through another fixture) marks the
    test ``local_only``: ``-m "not local_only"`` deselects it, and against a real
    cluster it is skipped before any of its fixtures runs. No API server starts here."""
    pytester.makepyfile(test_knobs=LOCAL_KNOB_TESTS)
    monkeypatch.delenv("OVERSEER_TEST_KUBECONFIG", raising=False)
    kept = pytester.runpytest("-p", "no:cacheprovider", "-m", "not local_only")
    kept.assert_outcomes(passed=1, deselected=3)
    picked = pytester.runpytest("-p", "no:cacheprovider", "-m", "local_only", "--collect-only")
    picked.stdout.fnmatch_lines(["*3/4 tests collected (1 deselected)*"])

    monkeypatch.setenv("OVERSEER_TEST_KUBECONFIG", str(pytester.path / "no-such-kubeconfig"))
    remote = pytester.runpytest("-p", "no:cacheprovider", "-rs")
    remote.assert_outcomes(passed=1, skipped=3)
    remote.stdout.fnmatch_lines(
        ["*local_only: needs the local API server's knobs; OVERSEER_TEST_KUBECONFIG is set*"]
    )
