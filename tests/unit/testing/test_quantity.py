"""Unit tests of ``resource.Quantity`` as the API server parses and writes it.

The expectations follow ``k8s.io/apimachinery/pkg/api/resource`` (0.36): ``ParseQuantity``
keeps the text of a quantity already in canonical form (judged on the digits after the
sign and the leading zeros), anything else is written by ``CanonicalizeBytes``.
"""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.api.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    QuantityError,
    canonical,
    from_json,
    parse,
)

_FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        # the measurements of issue 32 (kube-apiserver 1.36)
        ("0.5", "500m"),
        ("1024Mi", "1Gi"),
        ("07", "07"),  # canonical digits once the leading zero is dropped: kept as written
        ("15G", "15G"),
        ("0.1", "100m"),
        ("131072Ki", "128Mi"),
        ("1.5Gi", "1536Mi"),
        # canonical text is kept, the sign and leading zeros included
        ("+5", "+5"),
        ("-5", "-5"),
        ("007k", "007k"),
        ("1.", "1."),
        ("1.500", "1.500"),  # scale -3, digits "1500": canonical
        ("1e3", "1e3"),
        ("1E3", "1E3"),
        ("1e+3", "1e+3"),
        ("1.5e4", "1.5e4"),
        ("12e6", "12e6"),
        ("1Ki", "1Ki"),
        ("3Ki", "3Ki"),
        ("5n", "5n"),
        # anything else is rewritten
        ("1000m", "1"),
        ("1.5", "1500m"),
        ("1.0", "1"),
        ("2000", "2k"),
        ("1500", "1500"),
        ("0.5Gi", "512Mi"),
        ("1024Ki", "1Mi"),
        ("16Ki", "16Ki"),  # a multiple of 8: not kept, and rewritten the same
        ("1.5Mi", "1536Ki"),
        ("1.1Ki", "1126400m"),  # not a whole number of bytes: decimal
        ("-2048Ki", "-2Mi"),
        ("1e2", "100"),
        ("1000e3", "1e6"),
        ("0.0001m", "100n"),
        ("0.5n", "1n"),  # finer than a nano: rounded up
        ("-1.5", "-1500m"),
        ("0", "0"),
        ("00", "0"),
        ("-0", "0"),
        ("0Mi", "0"),
        (".", "0"),
        ("8Ei", "9223372036854775807"),  # BinarySI is capped at 2^63-1
        ("99999999999999999999", "99999999999999999999"),  # decimal is not capped
        ("1000E", "1"),  # 1e21 has no DecimalSI suffix: kube writes the digits alone
    ],
)
def test_parse_keeps_canonical_text_and_rewrites_the_rest(text: str, stored: str) -> None:
    assert str(parse(text)) == stored


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("lots", _FORMAT_WRONG),
        ("", _FORMAT_WRONG),
        ("1 Gi", _FORMAT_WRONG),
        ("1Zi", _FORMAT_WRONG),
        ("1.2.3", _FORMAT_WRONG),
        ("1ki", "unable to parse quantity's suffix"),
        ("1e", "unable to parse quantity's suffix"),
        ("1ee3", "unable to parse quantity's suffix"),
        (".e-10", "unable to parse numeric part of quantity"),
    ],
)
def test_parse_refuses_with_kubes_messages(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse(text)
    assert str(caught.value) == message


def test_formats_come_from_the_suffix() -> None:
    assert parse("1Mi").format == BINARY_SI
    assert parse("1M").format == DECIMAL_SI
    assert parse("1e6").format == DECIMAL_EXPONENT
    assert parse("0.5Ki").format == BINARY_SI  # 512: still binary
    assert str(parse("0.5Ki")) == "512"  # below 1024: written decimal


@pytest.mark.parametrize(
    ("value", "stored"),
    [(" 500m ", "500m"), (2, "2"), (1000, "1k"), (0.5, "500m"), (None, "0")],
)
def test_json_values_decode_as_unmarshal_json_does(value: Any, stored: str) -> None:
    assert canonical(value) == stored


@pytest.mark.parametrize("value", [True, {}, [], "null"])
def test_json_values_that_are_no_quantity(value: Any) -> None:
    with pytest.raises(QuantityError, match="quantities must match"):
        from_json(value)


def test_sums_forget_the_text_and_zero_takes_the_other_format() -> None:
    assert str(parse("07") + parse("0")) == "7"
    assert str(Quantity(0) + parse("1Gi")) == "1Gi"  # BinarySI from the non-zero term
    assert str(parse("500m") + parse("1.5")) == "2"
    assert str(parse("1Gi") - parse("512Mi")) == "512Mi"
    assert parse("1Gi") > parse("1G") > parse("999M")
    assert parse("1000m") == parse("1")


def test_scaled_values_round_up_away_from_zero() -> None:
    assert parse("1500m").value() == 2
    assert parse("-1500m").value() == -2
    assert parse("1.5").milli_value() == 1500
    assert parse("1n").milli_value() == 1
    assert parse("2k").value() == 2000
