"""The README's "Write your own controller" works as printed.

The code blocks marked with a ``title=`` (```python title=overseer_teaminfo/__init__.py,
```python title=tests/test_teaminfo.py, ```toml title=pyproject.toml, the Dockerfile,
``deploy/``) are written into a temporary project directory; a ``.dist-info`` made from
the pyproject's name, version and entry points puts the plugin on ``sys.path`` the way
``pip install`` would. Then: it is discovered and configured; its own tests pass (pytest
in a subprocess, against the same API server as this suite: the local one or
``OVERSEER_TEST_KUBECONFIG``); mypy finds ``manager`` in its directory;
``overseer run --embedded --plugin`` as printed reconciles; the Dockerfile's build
command installs it into a virtualenv without pip next to ``kube-overseer``, where
``overseer plugins`` and ``overseer rbac`` see it; ``kubectl kustomize deploy/`` renders
the install with its image, its configuration and its ClusterRole.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from e2e.test_cli import Process
from manager import KubeClient, builtin
from manager.plugins import ENTRY_POINT_GROUP, declared_rbac_rules, discover, load
from manager.testing import ConfigError, eventually, validate_section

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NAMESPACES = builtin("v1", "namespaces")
CONFIGMAPS = builtin("v1", "configmaps")
BLOCK = re.compile(r"^```(\w+) title=(\S+)\n(.*?)^```$", re.M | re.S)
FILES = {
    "pyproject.toml",
    "overseer_teaminfo/__init__.py",
    "tests/test_teaminfo.py",
    "deploy/overseer.yaml",
    "deploy/kustomization.yaml",
    "Dockerfile",
}


MIRROR_FILES = {
    "pyproject.toml",
    "overseer_secretmirror/__init__.py",
    "tests/test_secretmirror.py",
}
FAN_OUT = "## Fan-out: one object, many targets"
WEBHOOKS = "## Webhooks: default, validate, convert"
WIDGET_FILES = {
    "pyproject.toml",
    "overseer_widgets/__init__.py",
    "tests/test_widgets.py",
}
FLEETS = "## Fleets: one manager, many clusters"
FLEET_FILES = {"overseer_clusterinfo/__init__.py", "tests/test_clusterinfo.py"}


def section(heading: str = "## Write your own controller") -> str:
    """The README from ``heading`` to the next section of the same level."""
    text = README.read_text()
    body = text[text.index(heading) :]
    end = body.find("\n## ", len(heading))
    return body if end < 0 else body[: end + 1]


def readme_files(heading: str = "## Write your own controller") -> dict[str, str]:
    return {title: body for _lang, title, body in BLOCK.findall(section(heading))}


def readme_command(prefix: str) -> list[str]:
    """The README's shell command that starts with ``prefix`` (continuations joined)."""
    text = section().replace("\\\n", " ")
    line = next(li.strip() for li in text.splitlines() if li.strip().startswith(prefix))
    return shlex.split(line.split("  #")[0])


def _project(root: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """A plugin's project directory made of README blocks, as if ``pip install -e``'d."""
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    dist = root / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n"
    )
    entry_points = meta["entry-points"][ENTRY_POINT_GROUP]
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    )
    monkeypatch.syspath_prepend(str(root))
    return root


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The first example's project directory, as if ``pip install -e``'d."""
    root = _project(tmp_path / "overseer-teaminfo", readme_files(), monkeypatch)
    try:
        yield root
    finally:
        sys.modules.pop("overseer_teaminfo", None)


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fan-out example's project directory (the Secret mirror)."""
    root = _project(tmp_path / "overseer-secretmirror", readme_files(FAN_OUT), monkeypatch)
    try:
        yield root
    finally:
        sys.modules.pop("overseer_secretmirror", None)


@pytest.fixture
def widgets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The webhooks example's project directory (Widgets)."""
    root = _project(tmp_path / "overseer-widgets", readme_files(WEBHOOKS), monkeypatch)
    try:
        yield root
    finally:
        sys.modules.pop("overseer_widgets", None)


def _env(project: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)])}


def _own_tests(project: Path) -> str:
    """pytest in the project's directory (the kit's fixtures come from the installed
    pytest plugin; OVERSEER_TEST_KUBECONFIG, when set, is inherited): its output."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
        cwd=project,
        env=_env(project),
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for the examples' runs: ``manager`` and the stubs are analysed once;
    each example's own modules (distinct names) are checked in its run."""
    return tmp_path_factory.mktemp("mypy-cache")


def _mypy_strict(project: Path, package: str, cache_dir: Path) -> None:
    """mypy --strict on the project with no MYPYPATH, not from Overseer's directory:
    ``manager`` comes from the install."""
    env = {k: v for k, v in _env(project).items() if k not in ("MYPYPATH", "PYTHONPATH")}
    cache = str(cache_dir)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, package, "tests"],
        capture_output=True,
        text=True,
        cwd=project,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_readme_has_the_plugin_files() -> None:
    assert set(readme_files()) == FILES
    assert set(readme_files(FAN_OUT)) == MIRROR_FILES


def test_discovered_configured_and_declaring_its_rbac(project: Path) -> None:
    infos = {i.name: i for i in discover()}
    info = infos["teaminfo"]
    assert (info.distribution, info.version) == ("overseer-teaminfo", "0.1.0")
    plugin = load(info)
    deployed = yaml.safe_load((project / "deploy" / "overseer.yaml").read_text())
    settings, own = validate_section(plugin, deployed["controllers"]["teaminfo"])
    assert (settings.workers, own.contact, own.label) == (2, "{team}@corp.example", "team")
    with pytest.raises(ConfigError) as info_:
        validate_section(plugin, {"contct": "x", "workers": 0})
    assert info_.value.problems == [
        "controllers.teaminfo.workers: expected integer >= 1 and <= 256, got 0",
        "controllers.teaminfo.contct: unknown key, did you mean contact? (known keys: "
        "contact, label)",
    ]
    rules = declared_rbac_rules("teaminfo", plugin, own)
    assert rules is not None
    assert {r["resources"][0] for r in rules} == {"namespaces", "configmaps"}


@pytest.mark.slow
def test_its_own_tests_pass_with_the_kit(project: Path) -> None:
    assert "2 passed" in _own_tests(project)


@pytest.mark.slow
def test_mypy_finds_manager_from_the_plugins_directory(project: Path, mypy_cache: Path) -> None:
    _mypy_strict(project, "overseer_teaminfo", mypy_cache)


@pytest.mark.slow
def test_overseer_run_embedded_plugin_as_printed(project: Path) -> None:
    command = readme_command("overseer run --embedded --plugin")
    assert command[:2] == ["overseer", "run"]
    p = Process(*command[1:], cwd=project, env=_env(project))
    try:
        p.wait_for_output("probes: http://127.0.0.1:", timeout=40)
        found = re.search(r"^kubeconfig: (\S+)", p.output, re.M)
        assert found, p.output
        with KubeClient.from_kubeconfig(found.group(1)) as c:
            c.create(NAMESPACES, {"metadata": {"name": "payments", "labels": {"team": "pay"}}})
            made = eventually(lambda: c.get(CONFIGMAPS, "team-info", "payments"), timeout=20)
        assert made["data"] == {"team": "pay", "contact": "pay@corp.example"}
        assert p.stop(signal.SIGINT) == 0, p.output
    finally:
        p.close()
    assert "Traceback" not in p.output


def _dockerfile_run(dockerfile: str) -> str:
    """The builder stage's RUN command (continuation lines joined)."""
    text = re.sub(r"\\\n\s*", " ", dockerfile)
    runs = [line.strip()[4:] for line in text.splitlines() if line.strip().startswith("RUN ")]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.mark.slow
def test_image_recipe_in_a_plain_virtualenv_and_the_kustomization(
    project: Path, tmp_path: Path
) -> None:
    """What the Dockerfile does, without docker: Overseer installed (not editable, no pip)
    in a virtualenv standing for the image's /opt/overseer; the builder's RUN command with
    that path; then the image's view of the plugin, and the install kustomize renders."""
    image = tmp_path / "opt-overseer"
    venv.EnvBuilder(with_pip=False).create(image)
    python = image / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    subprocess.run(
        # not byte-compiled (half the install's time): the commands below run the same from
        # the sources, and the RUN command under test compiles what it installs as printed
        [
            *pip,
            "install",
            "--quiet",
            "--no-compile",
            "--constraint",
            str(ROOT / "constraints.txt"),
            str(ROOT),
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    dockerfile = (project / "Dockerfile").read_text()
    assert "COPY --from=overseer /opt/overseer /opt/overseer" in dockerfile
    assert "COPY . /src" in dockerfile
    command = _dockerfile_run(dockerfile)
    command = command.replace("/opt/overseer", str(image)).replace(" /src", f" {project}")
    command = re.sub(r"^python ", f"{shlex.quote(sys.executable)} ", command)
    built = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=600, check=False
    )
    assert built.returncode == 0, built.stdout + built.stderr
    rows = [line.split(None, 4) for line in built.stdout.splitlines()]
    assert ["teaminfo", "overseer-teaminfo", "0.1.0", "yes", "ok"] in rows, built.stdout
    assert not (image / "bin" / "pip").exists()  # the image stays without pip

    overseer = str(image / "bin" / "overseer")
    config = str(project / "deploy" / "overseer.yaml")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    valid = subprocess.run(
        [overseer, "config", "validate", config],
        capture_output=True,
        text=True,
        env=clean,
        check=False,
    )
    assert valid.returncode == 0, valid.stderr
    rbac = subprocess.run(
        [overseer, "rbac", "--config", config],
        capture_output=True,
        text=True,
        env=clean,
        check=False,
    )
    assert rbac.returncode == 0, rbac.stderr
    (project / "deploy" / "rbac.yaml").write_text(rbac.stdout)
    cluster_role = next(d for d in yaml.safe_load_all(rbac.stdout) if d["kind"] == "ClusterRole")
    assert {(r["apiGroups"][0], r["resources"][0]) for r in cluster_role["rules"]} == {
        ("", "namespaces"),
        ("", "configmaps"),
        ("", "events"),  # the manager's event recorder
        # the secure metrics server asks who a caller is and whether it may read
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    }

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: cannot render deploy/ with kustomize")
    kustomization = project / "deploy" / "kustomization.yaml"
    text = kustomization.read_text()
    where = os.path.relpath(ROOT / "deploy", kustomization.parent)
    kustomization.write_text(text.replace("../../overseer/deploy", where))
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(kustomization.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    objs = [d for d in yaml.safe_load_all(rendered) if d]
    role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert role["rules"] == cluster_role["rules"]
    dep = next(o for o in objs if o["kind"] == "Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/overseer-teaminfo:0.1.0"
    (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
    volume_names = {
        v.get("configMap", {}).get("name") for v in dep["spec"]["template"]["spec"]["volumes"]
    }
    assert cm["metadata"]["name"] in volume_names
    assert cm["data"]["overseer.yaml"] == (project / "deploy" / "overseer.yaml").read_text()


# -- the second example: fan-out (the Secret mirror) ------------------------------------


def test_the_mirror_is_discovered_configured_and_declares_its_rbac(mirror: Path) -> None:
    info = {i.name: i for i in discover()}["secretmirror"]
    assert (info.distribution, info.version) == ("overseer-secretmirror", "0.1.0")
    plugin = load(info)
    _, own = validate_section(plugin, {"source": "vault", "targets": "env in (dev, prod)"})
    assert (own.source, own.selector, own.targets) == ("vault", "mirror=true", "env in (dev, prod)")
    with pytest.raises(ConfigError) as info_:
        validate_section(plugin, {"selector": "mirror in (true"})
    [problem] = info_.value.problems
    assert problem.startswith('controllers.secretmirror.selector: invalid label selector "mirror')
    rules = declared_rbac_rules("secretmirror", plugin, own)
    assert rules is not None
    assert {r["resources"][0] for r in rules} == {"secrets", "namespaces"}


@pytest.mark.slow
def test_the_mirrors_own_tests_pass_with_the_kit(mirror: Path) -> None:
    """As printed: under the RBAC ``overseer rbac`` generates for it (the kit's default),
    against this suite's API server, without watch_namespace."""
    assert "1 passed" in _own_tests(mirror)


@pytest.mark.slow
def test_mypy_checks_the_mirror(mirror: Path, mypy_cache: Path) -> None:
    _mypy_strict(mirror, "overseer_secretmirror", mypy_cache)


# -- the third example: webhooks (Widgets) --------------------------------------------------


def test_the_widgets_example_has_its_files() -> None:
    assert set(readme_files(WEBHOOKS)) == WIDGET_FILES


@pytest.mark.slow
def test_the_widgets_own_tests_pass_with_the_kit(widgets: Path) -> None:
    """As printed: the handlers alone, and the API server calling them (the kit installs
    the webhooks and the conversion for the run)."""
    assert "2 passed" in _own_tests(widgets)


@pytest.mark.slow
def test_mypy_checks_the_widgets(widgets: Path, mypy_cache: Path) -> None:
    _mypy_strict(widgets, "overseer_widgets", mypy_cache)


# -- the fleet example (clusterinfo) ---------------------------------------------------------


@pytest.fixture
def clusterinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The fleet example's project directory (no pyproject: run from its directory, as
    the kit puts pytest's rootdir on sys.path)."""
    root = tmp_path / "overseer-clusterinfo"
    for name, body in readme_files(FLEETS).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    monkeypatch.syspath_prepend(str(root))
    try:
        yield root
    finally:
        sys.modules.pop("overseer_clusterinfo", None)


def test_the_fleet_example_has_its_files() -> None:
    assert set(readme_files(FLEETS)) == FLEET_FILES


@pytest.mark.slow
def test_the_fleet_examples_own_tests_pass_with_the_kit(clusterinfo: Path) -> None:
    """As printed: fleet-wide in two more local API servers, the home cluster this
    suite's (its RBAC the one ``overseer rbac`` generates)."""
    assert "1 passed" in _own_tests(clusterinfo)


@pytest.mark.slow
def test_mypy_checks_the_fleet_example(clusterinfo: Path, mypy_cache: Path) -> None:
    _mypy_strict(clusterinfo, "overseer_clusterinfo", mypy_cache)
