"""The fleet's parts that need no API server: providers, the kubeconfig of a Secret, the
policy and the listeners, the configuration, RBAC, readiness and /statusz, requests."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager import ClusterNotFound, KubeClient, Request, Result
from manager.client.kubeconfig import ClusterConfig, load_kubeconfig_data
from manager.config import manager_options, parse
from manager.errors import ConfigError
from manager.fleet import (
    Cluster,
    ClusterSource,
    Fleet,
    FleetController,
    KubeconfigFile,
    KubeconfigFiles,
    KubeconfigSecrets,
    cluster_name_of_secret,
)
from manager.fleet.controller import _Stamped, is_factory
from manager.handler import EnqueueRequestForObject
from manager.healthz import Checks
from manager.manager import Manager, ManagerOptions
from manager.plugins import PluginSet
from manager.rbac import for_controllers
from manager.resources import builtin
from manager.zpages import ClusterStatus, Status, render_statusz_html, render_statusz_text

CONFIGMAPS = builtin("v1", "configmaps")


def _kubeconfig_text(server: str = "https://10.0.0.1:6443", **user: Any) -> str:
    return yaml.safe_dump(
        {
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": user or {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )


# -- the kubeconfig of a Secret ------------------------------------------------------


def test_a_secrets_kubeconfig_is_read_from_its_embedded_data() -> None:
    config = load_kubeconfig_data(_kubeconfig_text(token="abc"), "secret fleet/a-kubeconfig")
    assert config.server == "https://10.0.0.1:6443"
    assert config.credentials is not None and config.credentials.authorization() == "Bearer abc"


@pytest.mark.parametrize(
    ("where", "entry"),
    [
        ("users", {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}),
        ("users", {"exec": {"command": "sh", "apiVersion": "client.authentication.k8s.io/v1"}}),
        ("users", {"client-certificate": "/etc/cert", "client-key": "/etc/key"}),
        ("clusters", {"certificate-authority": "/etc/ca.crt"}),
    ],
)
def test_a_secrets_kubeconfig_may_not_name_files_or_commands(
    where: str, entry: dict[str, Any]
) -> None:
    doc = yaml.safe_load(_kubeconfig_text())
    section = doc[where][0]
    body = section["user" if where == "users" else "cluster"]
    body.update(entry)
    with pytest.raises(ConfigError, match="refers to something outside the kubeconfig"):
        load_kubeconfig_data(yaml.safe_dump(doc), "secret fleet/a-kubeconfig")


def test_a_secret_that_is_no_kubeconfig_says_so() -> None:
    with pytest.raises(ConfigError, match="secret fleet/a-kubeconfig: not valid YAML"):
        load_kubeconfig_data(b"{: nope", "secret fleet/a-kubeconfig")


# -- kubeconfig Secrets ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "labels", "cluster"),
    [
        ("east-kubeconfig", {"cluster.x-k8s.io/cluster-name": "east"}, "east"),
        ("east-kubeconfig", {}, "east"),
        ("east-user-kubeconfig", {"cluster.x-k8s.io/cluster-name": "east"}, None),
        ("east-ca", {"cluster.x-k8s.io/cluster-name": "east"}, None),
        ("East_-kubeconfig", {}, None),
    ],
)
def test_which_cluster_a_secret_is_for(
    name: str, labels: dict[str, str], cluster: str | None
) -> None:
    assert cluster_name_of_secret({"metadata": {"name": name, "labels": labels}}) == cluster


class Sink:
    """What a provider reported."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (verb, name, revision)
        self.changed = threading.Event()

    def engage(self, name: str, source: ClusterSource) -> None:
        self.calls.append(("engage", name, source.revision))
        self.changed.set()

    def disengage(self, name: str) -> None:
        self.calls.append(("disengage", name, ""))
        self.changed.set()


class _NoInformer:
    def add_event_handler(self, handler: object) -> object:
        return object()

    def remove_event_handler(self, registration: object) -> None:
        pass


def _secret(name: str, kubeconfig: str, *, namespace: str = "fleet") -> dict[str, Any]:
    value = base64.b64encode(kubeconfig.encode()).decode()
    return {"metadata": {"name": name, "namespace": namespace}, "data": {"value": value}}


def test_kubeconfig_secrets_engage_rotate_and_disengage() -> None:
    provider = KubeconfigSecrets(_NoInformer())  # type: ignore[arg-type]
    sink = Sink()
    stop = threading.Event()
    stop.set()
    provider.run(stop, sink)  # registers the sink, returns at once (stop is set)
    first = _secret("east-kubeconfig", _kubeconfig_text(token="one"))
    provider.on_add(first, True)
    provider.on_update(first, first)  # the same content: nothing new
    rotated = _secret("east-kubeconfig", _kubeconfig_text(token="two"))
    provider.on_update(first, rotated)
    provider.on_add(_secret("west-kubeconfig", "not: [a kubeconfig"), False)  # unusable
    user = _secret("east-user-kubeconfig", _kubeconfig_text())  # Cluster API's, for users
    user["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "east"}
    provider.on_add(user, False)  # skipped: east's is east-kubeconfig
    provider.on_delete(rotated)
    verbs = [(verb, name) for verb, name, _ in sink.calls]
    assert verbs == [("engage", "east"), ("engage", "east"), ("disengage", "east")]
    assert sink.calls[0][2] != sink.calls[1][2]  # another revision: new credentials


def test_kubeconfig_files_are_read_again_and_a_change_engages_again(tmp_path: Path) -> None:
    path = tmp_path / "east"
    path.write_text(_kubeconfig_text(token="one"))
    provider = KubeconfigFiles(
        [KubeconfigFile(name="east", path=str(path)), KubeconfigFile(name="gone", path="/no")],
        reload_period=0.01,
    )
    sink = Sink()
    stop = threading.Event()
    thread = threading.Thread(target=provider.run, args=(stop, sink))
    thread.start()
    try:
        assert sink.changed.wait(5)
        sink.changed.clear()
        path.write_text(_kubeconfig_text(token="two"))
        assert sink.changed.wait(5)
    finally:
        stop.set()
        thread.join(5)
    assert [(v, n) for v, n, _ in sink.calls] == [("engage", "east"), ("engage", "east")]


def test_a_cluster_name_must_be_a_dns_label() -> None:
    with pytest.raises(ValueError, match="not a DNS label"):
        KubeconfigFiles([KubeconfigFile(name="East", path="/x")])


# -- the fleet: policy, listeners ----------------------------------------------------


@pytest.fixture
def mgr() -> Iterator[Manager]:
    client = KubeClient(ClusterConfig(server="http://127.0.0.1:9"))  # never asked
    yield Manager(
        client,
        ManagerOptions(
            metrics_bind_address="0", health_probe_bind_address="0", leader_election=False
        ),
    )
    client.close()


class Listener:
    def __init__(self) -> None:
        self.ready: list[str] = []
        self.left: list[str] = []
        self.changed = threading.Condition()

    def cluster_ready(self, cluster: Cluster) -> None:
        with self.changed:
            self.ready.append(cluster.name)
            self.changed.notify_all()

    def cluster_leaving(self, name: str, timeout: float) -> bool:
        with self.changed:
            self.left.append(name)
            self.changed.notify_all()
        return True

    def wait(self, check: Any) -> None:
        with self.changed:
            assert self.changed.wait_for(check, 5), (self.ready, self.left)


class OnlyOne:
    def __init__(self, name: str) -> None:
        self.name = name

    def engages(self, name: str) -> bool:
        return name == self.name


def test_the_policy_decides_which_known_clusters_are_engaged(mgr: Manager) -> None:
    fleet = Fleet(mgr)
    listener = Listener()
    fleet.subscribe(listener)
    fleet.set_policy(OnlyOne("x"))
    home = ClusterSource(None, "home", "home")
    fleet.engage("x", home, provider="test")
    fleet.engage("y", home, provider="test")
    stop = threading.Event()
    thread = threading.Thread(target=fleet.run, args=(stop,))
    thread.start()
    try:
        listener.wait(lambda: listener.ready == ["x"])
        assert fleet.known() == ["x", "y"]
        assert fleet.ready_reasons()["cluster/y"] == "not engaged by this replica"
        with pytest.raises(ClusterNotFound, match="'y' is not engaged"):
            fleet.cluster("y")
        fleet.set_policy(OnlyOne("y"))  # the policy changed its mind: x leaves, y comes
        listener.wait(lambda: listener.ready == ["x", "y"] and listener.left == ["x"])
        assert fleet.clusters() == ["y"]
        fleet.disengage("y", provider="someone else")  # not its provider's: ignored
        assert fleet.known() == ["x", "y"]
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert listener.left == ["x", "y"]  # everything leaves when the fleet stops


def test_the_first_provider_to_name_a_cluster_keeps_it(mgr: Manager) -> None:
    fleet = Fleet(mgr)
    fleet.engage("x", ClusterSource(None, "1", "first"), provider="one")
    fleet.engage("x", ClusterSource(None, "2", "second"), provider="two")
    assert [(s.name, s.provider) for s in fleet.status()] == [("x", "one")]


def test_manager_cluster_without_a_fleet(mgr: Manager) -> None:
    assert mgr.cluster().client is mgr.client
    with pytest.raises(ClusterNotFound):
        mgr.cluster("east")


# -- fleet-wide controllers ----------------------------------------------------------


class Nothing:
    def reconcile(self, request: Request) -> Result:
        return Result()


def test_a_factory_is_told_from_a_reconciler() -> None:
    assert is_factory(Nothing) and is_factory(lambda cluster: Nothing())
    assert not is_factory(Nothing())


def test_a_controller_that_is_not_fleet_wide_gets_its_reconciler_from_the_home_cluster(
    mgr: Manager,
) -> None:
    seen: list[str] = []

    def make(cluster: Cluster) -> Nothing:
        seen.append(cluster.name)
        assert cluster.client is mgr.client
        return Nothing()

    controller = mgr.controller("plain", make).for_(CONFIGMAPS).complete()
    assert seen == [""] and not isinstance(controller, FleetController)


def test_fleet_wide_and_sharded_needs_sharding_options(mgr: Manager) -> None:
    with pytest.raises(ValueError, match="no sharding options"):
        mgr.controller("x", Nothing(), fleet=True, sharded=True)


def test_a_fleet_wide_controller_watches_scopes_not_informers(mgr: Manager) -> None:
    controller = mgr.controller("x", Nothing(), fleet=True).for_(CONFIGMAPS).complete()
    assert isinstance(controller, FleetController)
    with pytest.raises(TypeError, match="fleet-wide"):
        controller.watch(mgr.informer(CONFIGMAPS), EnqueueRequestForObject())
    with pytest.raises(RuntimeError, match="queue per cluster"):
        _ = controller.queue


def test_requests_carry_their_cluster_and_may_name_another() -> None:
    routed: list[Request] = []

    class Mapper:
        def requests(self, obj: Any) -> list[Request]:
            return [Request("ns", "a"), Request("ns", "b", "west"), Request("ns", "c", "east")]

    stamped = _Stamped(Mapper(), "east", lambda req: routed.append(req) or True)
    assert list(stamped.requests({})) == [Request("ns", "a", "east"), Request("ns", "c", "east")]
    assert routed == [Request("ns", "b", "west")]
    assert str(Request("ns", "a", "east")) == "east:ns/a"
    assert Request("ns", "a").cluster == "" and str(Request("ns", "a")) == "ns/a"


# -- configuration, RBAC -------------------------------------------------------------


def test_clusters_in_the_configuration() -> None:
    config, _ = parse(
        {
            "clusters": {
                "home": True,
                "kubeconfigs": [{"name": "east", "path": "/etc/fleet/east"}],
                "secrets": {"enabled": True, "namespace": "fleet"},
                "unreachableAfter": 30,
            }
        },
        {},
    )
    fleet = manager_options(config).fleet
    assert fleet is not None
    assert fleet.home == "home" and fleet.kubeconfigs[0].name == "east"
    assert fleet.secrets_namespace == "fleet" and fleet.unreachable_after == 30.0
    assert manager_options(parse({}, {})[0]).fleet is None  # no provider, no fleet


def test_clusters_configuration_errors_have_paths() -> None:
    with pytest.raises(ConfigError) as info:
        parse(
            {
                "clusters": {
                    "home": True,
                    "kubeconfigs": [{"name": "home", "path": "/x"}, {"name": "Bad", "path": ""}],
                    "secrets": {"labelSelector": "a in (b"},
                }
            },
            {},
        )
    problems = "\n".join(info.value.problems)
    assert "clusters.kubeconfigs[1].name: must be a DNS label" in problems
    assert "clusters.kubeconfigs[1].path: must be set" in problems
    assert 'clusters.secrets.labelSelector: invalid label selector "a in (b"' in problems


def test_a_fleet_sharded_by_cluster_configures_the_ring() -> None:
    from manager.config import manager_options
    from manager.plugins import NoSettings

    config, controllers = parse(
        {
            "clusters": {"secrets": {"enabled": True}},
            "controllers": {"x": {"fleet": True, "sharded": True}},
        },
        {"x": NoSettings},
    )
    options = manager_options(config, controllers)
    assert options.sharding is not None and options.fleet is not None


def test_fleet_wide_controllers_are_all_sharded_or_none() -> None:
    from manager.plugins import NoSettings

    sections = {"x": {"fleet": True, "sharded": True}, "y": {"fleet": True}}
    with pytest.raises(ConfigError, match=r"all sharded by cluster or none.*sharded x; not y"):
        parse({"controllers": sections}, {"x": NoSettings, "y": NoSettings})


def test_kubeconfig_secrets_get_a_role_in_their_namespace_only() -> None:
    config, controllers = parse({"clusters": {"secrets": {"enabled": True}}}, {})
    text, _ = for_controllers(PluginSet().plugins, config, controllers, namespace="ops")
    docs = [d for d in yaml.safe_load_all(text) if d]
    roles = [d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == "ops"]
    secrets = [r for role in roles for r in role["rules"] if r["resources"] == ["secrets"]]
    assert secrets == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}
    ]
    cluster_roles = [d for d in docs if d["kind"] == "ClusterRole"]
    assert not any("secrets" in r.get("resources", []) for d in cluster_roles for r in d["rules"])


# -- readiness, /statusz -------------------------------------------------------------


def test_per_cluster_readiness_is_listed_and_asked_but_never_fails_the_replica() -> None:
    checks = Checks()
    checks.add("informers-synced", lambda: None)
    checks.add_informational(lambda: {"cluster/east": None, "cluster/west": "unreachable: x"})
    ok, lines = checks.run()
    assert ok
    assert lines == [
        "[+]informers-synced ok",
        "[+]cluster/east ok",
        "[-]cluster/west failed (informational): unreachable: x",
    ]
    assert checks.run("cluster/east") == (True, ["[+]cluster/east ok"])
    assert checks.run("cluster/west") == (False, ["[-]cluster/west failed: unreachable: x"])


def test_statusz_lists_the_clusters() -> None:
    status = Status(
        component="overseer",
        version="0",
        python="3",
        identity="me",
        started=0.0,
        uptime=1.0,
        role="leader",
        leader="me",
        lease="",
        ring=None,
        controllers=(),
        clusters=(
            ClusterStatus(
                name="west",
                provider="secrets",
                server="https://west:6443",
                state="unreachable",
                since=0.0,
                reason="no answer for 60.0 s",
            ),
        ),
    )
    text = render_statusz_text(status)
    assert "Clusters:" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("west"))
    assert "secrets" in row and "unreachable" in row and "no answer for 60.0 s" in row
    assert '<tr data-cluster="west">' in render_statusz_html(status)


def test_flagz_shows_where_the_cluster_secrets_are() -> None:
    """``clusters.secrets`` names Secrets, it holds none: /flagz shows it."""
    from manager.zpages import flag_values

    config, _ = parse({"clusters": {"secrets": {"enabled": True, "namespace": "fleet"}}}, {})
    values = dict(flag_values(config))
    assert values["clusters.secrets.namespace"] == "fleet"
    assert values["clusters.secrets.enabled"] == "true"


class _Ring:
    """A shard ring's answers, set by the test."""

    def __init__(self) -> None:
        self.mine: set[int] = set()  # hashes begin/keeps allow
        self.inflight: list[str] = []
        self.watchers: list[Any] = []

    def add_watcher(self, watcher: Any) -> None:
        self.watchers.append(watcher)

    def begin(self, key: str, h: int) -> bool:
        if h not in self.mine:
            return False
        self.inflight.append(key)
        return True

    def end(self, key: str, h: int) -> None:
        self.inflight.remove(key)

    def keeps(self, h: int) -> bool:
        return h in self.mine


def test_a_fleet_sharded_by_cluster_holds_a_cluster_on_the_ring_while_engaged() -> None:
    from manager.fleet.sharded import ClusterShards, cluster_hash

    ring = _Ring()
    told: list[str] = []
    policy = ClusterShards(ring, lambda: told.append("reconsider"))  # type: ignore[arg-type]
    assert len(ring.watchers) == 1
    assert not policy.engages("east")  # not ours: not begun
    ring.mine.add(cluster_hash("east"))
    assert policy.engages("east") and policy.engages("east")  # begun once, then kept
    assert ring.inflight == ["cluster/east"] and policy.held() == ["east"]
    ring.mine.clear()  # a drain takes it away: no longer engaged, still held until it left
    assert not policy.engages("east") and ring.inflight == ["cluster/east"]
    policy.released("east")
    policy.released("east")  # once only
    assert ring.inflight == [] and policy.held() == []


def test_cluster_names_that_differ_in_one_letter_spread_over_the_ring() -> None:
    from manager.fleet.sharded import cluster_hash
    from manager.hashring import RingParameters, SlotRing

    ring = SlotRing(("a", "b", "c"), RingParameters())
    owners = [ring.owner_of(cluster_hash(f"prod-{i}")) for i in range(30)]
    assert all(owners.count(m) >= 4 for m in "abc"), owners


def test_fleet_wide_controllers_sharded_and_not_are_refused() -> None:
    from manager.sharding import ShardingOptions

    client = KubeClient(ClusterConfig(server="http://127.0.0.1:9"))  # never asked
    mgr = Manager(
        client,
        ManagerOptions(
            metrics_bind_address="0",
            health_probe_bind_address="0",
            leader_election=False,
            sharding=ShardingOptions(),
        ),
    )
    try:
        mgr.controller("x", Nothing(), fleet=True, sharded=True).for_(CONFIGMAPS).complete()
        with pytest.raises(ValueError, match="all sharded by cluster or none"):
            mgr.controller("y", Nothing(), fleet=True)
        assert type(mgr.fleet.policy).__name__ == "ClusterShards"
    finally:
        client.close()
