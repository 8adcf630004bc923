"""The strict configuration loader: every problem reported with its path, the default
file, and the files shipped in ``config/``.

Run ``python -m tests.unit.test_config`` to regenerate ``config/overseer.yaml`` after a
setting of the manager or of a built-in controller changes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.config import OverseerConfig, parse, read_yaml, render_defaults
from manager.errors import ConfigError
from manager.plugins import ControllerSettings, discover, load

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FILE = ROOT / "config" / "overseer.yaml"


@dataclass(frozen=True, kw_only=True, slots=True)
class Network:
    name: str = ""
    cidr: str = ""

    def validate(self) -> list[str]:
        return [] if self.name else ["name: required"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DemoConfig:
    greeting: str = field(default="Hello", metadata={"help": "first word"})
    label: str = "demo/greeted"
    retries: int = field(default=3, metadata={"min": 0, "max": 10})
    networks: tuple[Network, ...] = ()
    mode: str | None = None


SCHEMAS: dict[str, type[Any]] = {"sample": DemoConfig, "other": DemoConfig}


def problems(doc: Any, schemas: dict[str, type[Any]] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(doc, SCHEMAS if schemas is None else schemas)
    return info.value.problems


def test_empty_file_is_every_default() -> None:
    config, controllers = parse(None, SCHEMAS)
    assert config == OverseerConfig()
    assert controllers == {
        "other": (ControllerSettings(), DemoConfig()),
        "sample": (ControllerSettings(), DemoConfig()),
    }


def test_a_controller_section_sets_common_and_own_settings() -> None:
    doc = yaml.safe_load(
        """
        controllers:
          sample:
            enabled: false
            workers: 4
            rateLimiter: {maxDelay: 60}
            greeting: Hi
            networks: [{name: a, cidr: 10.0.0.0/8}]
        """
    )
    _, controllers = parse(doc, SCHEMAS)
    settings, own = controllers["sample"]
    assert (settings.enabled, settings.workers, settings.rate_limiter.max_delay) == (
        False,
        4,
        60.0,
    )
    assert own == DemoConfig(greeting="Hi", networks=(Network(name="a", cidr="10.0.0.0/8"),))
    assert controllers["other"] == (ControllerSettings(), DemoConfig())


def test_unknown_key_lists_the_known_keys() -> None:
    assert problems({"leaderElection": {"leaseDuraton": 15}}) == [
        "leaderElection.leaseDuraton: unknown key, did you mean leaseDuration? (known keys: "
        "enabled, leaseDuration, leaseName, namespace, renewDeadline, retryPeriod)"
    ]
    assert problems({"controllers": {"sample": {"greting": "x"}}}) == [
        "controllers.sample.greting: unknown key, did you mean greeting? (known keys: "
        "greeting, label, mode, networks, retries)"
    ]


def test_wrong_type() -> None:
    assert problems({"controllers": {"sample": {"workers": "four"}}}) == [
        'controllers.sample.workers: expected integer >= 1 and <= 256, got "four"'
    ]
    assert problems({"warmStandby": "yes"}) == ['warmStandby: expected boolean, got "yes"']
    assert problems({"client": {"burst": 2.5}}) == ["client.burst: expected integer >= 1, got 2.5"]
    assert problems({"client": {"qps": True}}) == ["client.qps: expected number >= 0.1, got true"]
    assert problems({"log": "json"}) == ['log: expected a mapping, got "json"']
    assert problems({"controllers": {"sample": {"networks": {"name": "a"}}}}) == [
        "controllers.sample.networks: expected a list, got {'name': 'a'}"
    ]


def test_out_of_range() -> None:
    assert problems({"controllers": {"sample": {"workers": 0, "retries": 11}}}) == [
        "controllers.sample.workers: expected integer >= 1 and <= 256, got 0",
        "controllers.sample.retries: expected integer >= 0 and <= 10, got 11",
    ]
    assert problems({"gracefulShutdownTimeout": -1}) == [
        "gracefulShutdownTimeout: expected number >= 0.0, got -1"
    ]


def test_cross_field_checks_carry_their_path() -> None:
    doc = {
        "leaderElection": {"leaseDuration": 5, "renewDeadline": 6},
        "controllers": {"sample": {"networks": [{"cidr": "10.0.0.0/8"}]}},
    }
    assert problems(doc) == [
        "leaderElection.renewDeadline: must be less than leaseDuration",
        "controllers.sample.networks[0].name: required",
    ]


def test_every_error_at_once_with_its_path() -> None:
    doc = yaml.safe_load(
        """
        client: {qps: 0, timeot: 3}
        log: {format: xml, level: loud}
        metricsBindAddress: 8080
        controllers:
          sample: {workers: four, rateLimiter: {burst: 0}, greeting: 7}
          other: {enabled: maybe}
          nope: {}
        """
    )
    assert sorted(problems(doc)) == sorted(
        [
            "client.qps: expected number >= 0.1, got 0",
            "client.timeot: unknown key, did you mean timeout? (known keys: burst, qps, timeout)",
            "log.format: expected one of 'text', 'json', got \"xml\"",
            "log.level: expected one of 'debug', 'info', 'warning', 'error', got \"loud\"",
            "metricsBindAddress: expected string, got 8080",
            "controllers.nope: unknown controller (installed: other, sample)",
            'controllers.other.enabled: expected boolean, got "maybe"',
            'controllers.sample.workers: expected integer >= 1 and <= 256, got "four"',
            "controllers.sample.rateLimiter.burst: expected integer >= 1, got 0",
            "controllers.sample.greeting: expected string, got 7",
        ]
    )


def test_unknown_controller_lists_every_installed_one() -> None:
    with pytest.raises(ConfigError) as info:
        parse({"controllers": {"exposr": {}}}, SCHEMAS, installed=["exposer", "sample"])
    assert info.value.problems == [
        "controllers.exposr: unknown controller, did you mean exposer? (installed: exposer, sample)"
    ]


def test_did_you_mean_the_closest_key_or_controller() -> None:
    def first(doc: Any) -> str:
        return problems(doc)[0].split(" (known keys")[0].split(" (installed")[0]

    # snake_case for camelCase, a wrong case, a typo; nothing for what resembles nothing
    assert first({"leaderElection": {"lease_duration": 1}}) == (
        "leaderElection.lease_duration: unknown key, did you mean leaseDuration?"
    )
    assert first({"WarmStandby": True}) == "WarmStandby: unknown key, did you mean warmStandby?"
    assert first({"controllers": {"sampel": {}}}) == (
        "controllers.sampel: unknown controller, did you mean sample?"
    )
    assert first({"controllers": {"sample": {"banana": 1}}}) == (
        "controllers.sample.banana: unknown key"
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Checked:
    owner: str = ""
    mode: str = "a"

    def validate(self) -> list[str]:
        out = []
        if not self.owner:
            out.append("must name an owner")  # no field: reported at the section
        if self.mode == "b":
            out.append("mode: b needs an owner")  # a field: reported at it
        if self.mode == "raise":
            raise RuntimeError("a broken validate")
        return out


def test_validate_problems_are_joined_to_their_path_and_listed_with_the_others() -> None:
    schemas: dict[str, type[Any]] = {"teaminfo": Checked}
    doc = {"client": {"qps": 0}, "controllers": {"teaminfo": {"mode": "b"}}}
    assert problems(doc, schemas) == [
        "client.qps: expected number >= 0.1, got 0",
        "controllers.teaminfo: must name an owner",
        "controllers.teaminfo.mode: b needs an owner",
    ]
    # a validate() that raises is a problem of the section, not a traceback
    assert problems({"controllers": {"teaminfo": {"owner": "x", "mode": "raise"}}}, schemas) == [
        "controllers.teaminfo: validate() raised RuntimeError: a broken validate"
    ]


def test_an_installed_plugin_that_cannot_load_is_fatal_unless_the_file_disables_it() -> None:
    """Issue 22, item 6: one rule for working and broken plugins: installed and not
    mentioned is enabled, so a broken one is a startup error naming the distribution
    and the error; ``enabled: false`` is the way out."""
    from manager.config import load_config
    from manager.errors import PluginLoadError
    from manager.plugins import PluginInfo, PluginSet

    broken = PluginLoadError("controller 'broken' from x 1 failed to load: ImportError: no")
    plugins = PluginSet(
        {
            "broken": PluginInfo("broken", "x:Y", "x", "1"),
            "sample": PluginInfo("sample", "", "", ""),
        },
        {"sample": _Demo()},
        {"broken": broken},
    )
    with pytest.raises(PluginLoadError) as info:
        load_config({}, plugins)
    assert str(info.value) == (
        f"controllers.broken: installed, so enabled, but cannot load: {broken} "
        "(disable it with controllers.broken.enabled: false)"
    )
    _, controllers, warnings = load_config({"controllers": {"broken": {"enabled": False}}}, plugins)
    assert set(controllers) == {"sample"}
    assert warnings == [f"controller 'broken' is disabled and cannot load: {broken}"]
    with pytest.raises(PluginLoadError) as info:
        load_config({"controllers": {"broken": {"workers": 2}}}, plugins)
    assert str(info.value) == (
        f"controllers.broken: enabled but cannot load: {broken} "
        "(disable it with controllers.broken.enabled: false)"
    )


class _Demo:
    config_class = DemoConfig

    def setup(self, mgr: Any, ctx: Any) -> None:
        raise AssertionError("not called")


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError) as info:
        parse(["a"], SCHEMAS, source="f.yaml")
    assert info.value.problems == ["f.yaml: expected a mapping at the top level, got ['a']"]


def test_invalid_yaml_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("client:\n  qps: 1\n  burst: [1, 2\nlog: {}\n")
    with pytest.raises(ConfigError) as info:
        read_yaml(path)
    [problem] = info.value.problems
    assert problem.startswith(f"{path}:4:4: not valid YAML: ")


def test_rendered_defaults_parse_back_to_the_defaults() -> None:
    text = render_defaults(SCHEMAS)
    config, controllers = parse(yaml.safe_load(text), SCHEMAS)
    assert dataclasses.replace(config, controllers={}) == OverseerConfig()
    assert controllers["sample"] == (ControllerSettings(), DemoConfig())
    assert "  # first word\n    greeting: Hello\n" in text
    assert "# concurrent reconciles; >= 1 and <= 256\n    workers: 1\n" in text


def _builtin_schemas() -> dict[str, type[Any]]:
    """The controllers shipped in the ``kube-overseer`` distribution (not test plugins)."""
    return {
        info.name: load(info).config_class
        for info in discover()
        if info.distribution == "kube-overseer"
    }


def test_default_file_is_the_output_of_config_defaults() -> None:
    """``config/overseer.yaml`` is ``overseer config defaults`` where only the built-in
    controllers are installed; with more installed (the sample plugin, whatever a
    developer added), the command shows their sections too, and nothing else changes."""
    from manager.cli import main
    from manager.plugins import load_plugins

    expected = render_defaults(_builtin_schemas())
    assert DEFAULT_FILE.read_text() == expected, (
        "config/overseer.yaml is stale: run `.venv/bin/python -m tests.unit.test_config`"
    )
    assert set(_builtin_schemas()) == {"exposer", "podport"}

    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["config", "defaults"]) == 0
    assert out.getvalue() == render_defaults(load_plugins().schemas)


def test_config_files_have_every_field_documented() -> None:
    for f in dataclasses.fields(OverseerConfig):
        assert f.metadata.get("help"), f.name


if __name__ == "__main__":
    DEFAULT_FILE.write_text(render_defaults(_builtin_schemas()))
    print(f"wrote {DEFAULT_FILE}")


@dataclass(frozen=True, kw_only=True, slots=True)
class MirrorConfig:
    source_selector: str = field(default="mirror=true", metadata={"format": "labelSelector"})
    targets: tuple[str, ...] = field(default=(), metadata={"format": "labelSelector"})


def test_label_selector_settings_are_parsed_as_kube_parses_them() -> None:
    """Issue 22, item 7: a label-selector setting was a plain string; an invalid one
    passed ``config validate``, then looped on 400."""
    schemas: dict[str, type[Any]] = {"mirror": MirrorConfig}
    _, controllers = parse(
        {"controllers": {"mirror": {"sourceSelector": "app in (a, b), !legacy"}}}, schemas
    )
    assert controllers["mirror"][1].source_selector == "app in (a, b), !legacy"
    found = problems(
        {"controllers": {"mirror": {"sourceSelector": "app in (a", "targets": ["ok", "x==y==z"]}}},
        schemas,
    )
    assert len(found) == 2, found
    assert found[0].startswith(
        'controllers.mirror.sourceSelector: invalid label selector "app in (a": '
    )
    assert found[1].startswith('controllers.mirror.targets[1]: invalid label selector "x==y==z": ')


# -- map settings (issue 32, item 3) ------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class TeamsConfig:
    owners: dict[str, str] = field(
        default_factory=lambda: {"team_payments": "ops", "example.com/tier": "gold"},
        metadata={"help": "owner per team"},
    )
    quotas: dict[str, int] = field(default_factory=dict)
    selectors: dict[str, str] = field(default_factory=dict, metadata={"format": "labelSelector"})


TEAMS: dict[str, type[Any]] = {"teams": TeamsConfig}


def test_map_keys_are_taken_as_written_and_a_map_replaces_the_default() -> None:
    """The field's name is camelCase in the file; the keys of the map it holds are the
    user's, never converted; the map given replaces the default map whole."""
    doc = yaml.safe_load(
        """
        controllers:
          teams:
            owners: {team_billing: finance, Team-X: x, "a.b/c_d": y}
            quotas: {team_billing: 3}
        """
    )
    _, controllers = parse(doc, TEAMS)
    own = controllers["teams"][1]
    assert own.owners == {"team_billing": "finance", "Team-X": "x", "a.b/c_d": "y"}
    assert own.quotas == {"team_billing": 3}
    assert parse({"controllers": {"teams": {"owners": {}}}}, TEAMS)[1]["teams"][1].owners == {}
    assert parse(None, TEAMS)[1]["teams"][1] == TeamsConfig()  # the default map
    assert problems({"controllers": {"teams": {"owners_x": {}}}}, TEAMS)[0].startswith(
        "controllers.teams.owners_x: unknown key"
    )


def test_map_values_are_checked_with_their_key_in_the_path() -> None:
    doc = {
        "controllers": {
            "teams": {
                "owners": {"team_a": 7, "team_b": None},
                "quotas": {"x": "three"},
                "selectors": {"web": "app=web", "bad": "app in (a"},
            }
        }
    }
    found = problems(doc, TEAMS)
    assert found[:3] == [
        "controllers.teams.owners.team_a: expected string, got 7",
        "controllers.teams.owners.team_b: expected string, got null",
        'controllers.teams.quotas.x: expected integer, got "three"',
    ]
    # format applies to each value of a map as to each item of a list
    bad_selector = 'controllers.teams.selectors.bad: invalid label selector "app in (a"'
    assert found[3].startswith(bad_selector)
    assert len(found) == 4
    assert problems({"controllers": {"teams": {"owners": ["a"]}}}, TEAMS) == [
        "controllers.teams.owners: expected a mapping, got ['a']"
    ]


@pytest.mark.parametrize(
    ("written", "shown", "read_as"),
    [
        ("1", "1", "a number"),
        ("1.5", "1.5", "a number"),
        ("true", "true", "a boolean (true, yes, on, false, no, off)"),
        ("yes", "true", "a boolean (true, yes, on, false, no, off)"),
        ("null", "null", "null (null, ~ or nothing)"),
        ("2026-01-02", "2026-01-02", "a date"),
    ],
    ids=["int", "float", "true", "yes", "null", "date"],
)
def test_a_map_key_yaml_reads_as_no_string_is_an_error_not_a_renamed_key(
    written: str, shown: str, read_as: str
) -> None:
    """YAML reads an unquoted ``1``, ``yes`` or ``null`` key as a number, a boolean,
    None: ``str()`` of it made keys ``"True"`` or ``"None"`` the user never wrote (and
    ``1`` and ``true`` one key)."""
    doc = yaml.safe_load(f"controllers: {{teams: {{owners: {{{written}: ops, ok: x}}}}}}")
    assert problems(doc, TEAMS) == [
        f"controllers.teams.owners: key {shown} is not a string: YAML reads it, unquoted, "
        f"as {read_as}; quote it"
    ]
    quoted = yaml.safe_load(f'controllers: {{teams: {{owners: {{"{written}": ops}}}}}}')
    assert parse(quoted, TEAMS)[1]["teams"][1].owners == {written: "ops"}


def test_map_defaults_in_config_defaults_and_flagz_keep_their_keys() -> None:
    from manager.zpages import flag_values

    text = render_defaults(TEAMS)
    assert (
        "    # owner per team\n"
        "    owners:\n"
        "      team_payments: ops\n"
        "      example.com/tier: gold\n"
        "    quotas: {}\n"
    ) in text
    config, controllers = parse(yaml.safe_load(text), TEAMS)
    assert controllers["teams"][1] == TeamsConfig()
    values = dict(flag_values(config, dict(controllers)))
    assert values["controllers.teams.owners.team_payments"] == "ops"
    assert values['controllers.teams.owners["example.com/tier"]'] == "gold"
    assert values["controllers.teams.quotas"] == "{}"
