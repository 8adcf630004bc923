"""The local server's shard selectors parse, refuse and match as kube-apiserver 1.36's
(apiserver pkg/sharding parser_test.go cases, apimachinery selector.go), and its feature
gates parse as kube's --feature-gates flag."""

from __future__ import annotations

import pytest

from apiserver.http.featuregates import feature_gates, parse_feature_gates
from apiserver.storage.shardselector import ShardSelectorError, parse_shard_selector
from manager.hashring import fnv1a_64

LOW = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
HIGH = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"

ACCEPTED = [
    (LOW, LOW),
    (HIGH, HIGH),
    (
        "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
        "shardRange(object.metadata.namespace, '0x00000000000000aa', '0x00000000000000ff')",
    ),
    (f"{LOW} || {HIGH}", f"{LOW} || {HIGH}"),
    ("shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')", LOW),
    ("  shardRange( object.metadata.uid ,  '0x0000000000000000' ,  '0x8000000000000000' )  ", LOW),
    ('shardRange(object.metadata.uid, "0x0000000000000000", "0x8000000000000000")', LOW),
    (f"({LOW}) || ({HIGH})", f"{LOW} || {HIGH}"),
]


@pytest.mark.parametrize(("text", "normal"), ACCEPTED)
def test_accepted_selectors_and_their_normal_form(text: str, normal: str) -> None:
    selector = parse_shard_selector(text)
    assert selector.string() == normal
    assert parse_shard_selector(selector.string()).string() == normal  # round trip


REFUSED = [
    ("", "empty shard selector is not allowed; omit the parameter for unfiltered lists"),
    ("   ", "empty shard selector is not allowed; omit the parameter for unfiltered lists"),
    (
        "bogus(object.metadata.uid, '0x00', '0x80')",
        'unsupported function "bogus"; only shardRange() and || are allowed',
    ),
    (
        f"{LOW} && {HIGH}",
        'unsupported function "_&&_"; only shardRange() and || are allowed',
    ),
    (
        "object.metadata.uid > '0x0'",
        'unsupported function "_>_"; only shardRange() and || are allowed',
    ),
    (
        "object.metadata.uid",
        "unexpected expression kind 7; expected shardRange() call or || operator",
    ),
    (
        "shardRange(object.metadata.uid, '0000000000000000', '0x8000000000000000')",
        "hexStart must have '0x' prefix, got \"0000000000000000\"",
    ),
    (
        "shardRange(object.metadata.uid, '0x', '0x8000000000000000')",
        "hexStart: hex value is required after '0x'",
    ),
    (
        "shardRange(object.metadata.name, '0x00', '0x80')",
        'unsupported field path "object.metadata.name"; supported: object.metadata.uid, '
        "object.metadata.namespace",
    ),
    (
        "shardRange(object.metadata.uid, '0x000000000000000000', '0x80')",
        'hexStart: hex value too long (18 chars, max 17): "000000000000000000"',
    ),
    (
        "shardRange(object.metadata.uid, '0x0g', '0x80')",
        'hexStart: invalid hex character "g" in "0x0g"',
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') x",
        "CEL parse error: ",
    ),
    ("shardRange(object.metadata.uid, 0, 8)", "hexStart must be a string literal, got int64"),
    ("shardRange(object.metadata.uid, '0x0')", "shardRange() requires exactly 3 arguments, got 2"),
    (
        "shardRange(object.metadata.uid, hex(0), '0x8')",
        "hexStart must be a string literal (e.g. '0xff'), got expression kind 1",
    ),
    (
        f"{LOW} || shardRange(object.metadata.namespace, '0x8000000000000000', "
        "'0x10000000000000000')",
        'all shard ranges must use the same field, got "object.metadata.uid" and '
        '"object.metadata.namespace"',
    ),
    (
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
        'hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" '
        '(did you mean "0x0000000000000000"?)',
    ),
    (
        "shardRange(object.metadata.uid, '0x8000000000000000', '0x8000000000000000')",
        "shard range start 0x8000000000000000 must be less than end 0x8000000000000000",
    ),
    (
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x20000000000000000')",
        "hexEnd: 17-digit hex value must be '0x10000000000000000' (2^64), "
        'got "0x20000000000000000"',
    ),
    (
        "shardRange(object.metadata.uid, '0x00000000000000AA', '0x8000000000000000')",
        'hexStart: invalid hex character "A" in "0x00000000000000AA"',
    ),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_refused_selectors_say_why_as_kube_does(text: str, message: str) -> None:
    with pytest.raises(ShardSelectorError) as error:
        parse_shard_selector(text)
    assert str(error.value).startswith(message), str(error.value)


def test_matching_is_fnv1a_of_uid_or_namespace_start_inclusive_end_exclusive() -> None:
    uids = [f"uid-{i}" for i in range(400)]
    low, high = parse_shard_selector(LOW), parse_shard_selector(HIGH)
    for uid in uids:
        obj = {"metadata": {"uid": uid}}
        assert low.matches(obj) == (fnv1a_64(uid) < 1 << 63)
        assert low.matches(obj) != high.matches(obj)
    h = fnv1a_64("uid-7")
    exact = parse_shard_selector(f"shardRange(object.metadata.uid, '0x{h:016x}', '0x{h + 1:016x}')")
    assert exact.matches({"metadata": {"uid": "uid-7"}})
    below = parse_shard_selector(f"shardRange(object.metadata.uid, '0x{h - 1:016x}', '0x{h:016x}')")
    assert not below.matches({"metadata": {"uid": "uid-7"}})
    by_ns = parse_shard_selector(
        f"shardRange(object.metadata.namespace, '0x{fnv1a_64('team'):016x}', '0x10000000000000000')"
    )
    assert by_ns.matches({"metadata": {"uid": "x", "namespace": "team"}})


def test_feature_gates_parse_like_kubes_flag() -> None:
    assert parse_feature_gates("ShardedListAndWatch=true") == {"ShardedListAndWatch": True}
    assert parse_feature_gates(" ShardedListAndWatch = false ,") == {"ShardedListAndWatch": False}
    assert parse_feature_gates("") == {}
    assert feature_gates() == {"ShardedListAndWatch": False}
    with pytest.raises(ValueError, match="unrecognized feature gate: Bogus"):
        parse_feature_gates("ShardedListAndWatch=true,Bogus=true")
    with pytest.raises(ValueError, match="invalid value of ShardedListAndWatch=yes"):
        parse_feature_gates("ShardedListAndWatch=yes")
    with pytest.raises(ValueError, match="missing bool value"):
        parse_feature_gates("ShardedListAndWatch")


def test_overseer_apiserver_refuses_an_unknown_gate(capsys: pytest.CaptureFixture[str]) -> None:
    from manager.cli import main

    assert main(["apiserver", "--feature-gates", "ShardedListAndWatch=true,Bogus=true"]) == 2
    err = capsys.readouterr().err
    assert "--feature-gates: unrecognized feature gate: Bogus" in err
