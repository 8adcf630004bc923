"""``resource.Quantity``: the fixed-point numbers of resource lists (``500m``, ``1Gi``).

A port of ``k8s.io/apimachinery/pkg/api/resource`` (``quantity.go``, ``amount.go``,
``suffix.go``, apimachinery 0.36) as the API server uses it:

* :func:`parse` is ``ParseQuantity``: the value, its format (``DecimalSI``, ``BinarySI``,
  ``DecimalExponent``, from the suffix) and, when the text is already in canonical form,
  the text itself, which is then written back as given (``07``, ``15G``, ``+5``: the
  canonical test looks at the digits after the sign and the leading zeros are dropped);
  anything else is written in canonical form (``0.5`` -> ``500m``, ``1024Mi`` ->
  ``1Gi``, ``1.5Gi`` -> ``1536Mi``). Errors carry kube's messages (``quantities must
  match the regular expression ...``).
* :func:`from_json` is ``UnmarshalJSON`` (a JSON string, a number by its text, ``null``
  for zero) and ``str()`` of a quantity is ``MarshalJSON``/``String()``.
* arithmetic and comparisons are those of ``Add``, ``Sub`` and ``Cmp`` (a sum forgets
  the text it was parsed from; a zero term takes the other's format).

Every parsed quantity is a whole number of nano-units (``ParseQuantity`` rounds finer
values up), so the value is kept as an ``int`` of nanos: exact at any size.

Thread-safety: immutable values and pure functions; safe to share between threads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any, Final

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "ZERO",
    "Quantity",
    "QuantityError",
    "canonical",
    "from_json",
    "parse",
]

DECIMAL_EXPONENT: Final = "DecimalExponent"  # 12e6
BINARY_SI: Final = "BinarySI"  # 12Mi
DECIMAL_SI: Final = "DecimalSI"  # 12M

_SPLIT_RE: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_WRONG: Final = f"quantities must match the regular expression '{_SPLIT_RE}'"
NUMERIC: Final = "unable to parse numeric part of quantity"
SUFFIX: Final = "unable to parse quantity's suffix"

_NANO: Final = 10**9
_MAX_INT64: Final = (1 << 63) - 1
_MAX_INT64_FACTORS: Final = 18  # decimal digits an int64 always holds
# kube keeps any int32 exponent (``1e2000000000`` is a quantity); holding its value as an
# integer of nanos would take gigabytes, so this port refuses decimal exponents above
# _MAX_EXPONENT and numbers longer than _MAX_DIGITS with ErrNumeric's message.
_MAX_EXPONENT: Final = 1000
_MAX_DIGITS: Final = 1000
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")

_DECIMAL_SUFFIXES: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT: Final = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT: Final = {e: s for s, e in _BINARY_SUFFIXES.items()}


class QuantityError(ValueError):
    """Not a quantity; the message is ``ParseQuantity``'s error."""


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """One ``resource.Quantity``.

    Attributes:
        nanos: the value in nano-units (``1`` is ``1_000_000_000``).
        format: ``DecimalSI``, ``BinarySI`` or ``DecimalExponent``: how it is written.
        text: what it was parsed from, when that was already canonical ("" otherwise);
            ``str()`` writes it back unchanged, as ``MarshalJSON`` does.
    """

    nanos: int
    format: str = DECIMAL_SI
    text: str = ""

    @classmethod
    def of(cls, value: int, fmt: str = DECIMAL_SI) -> Quantity:
        """``NewQuantity``: a whole number."""
        return cls(value * _NANO, fmt)

    def __str__(self) -> str:
        return self.text or _canonical(self.nanos, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    # -- arithmetic (Add/Sub clear the text; a zero operand takes the other's format) --

    def __add__(self, other: Quantity) -> Quantity:
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos + other.nanos, fmt)

    def __sub__(self, other: Quantity) -> Quantity:
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos - other.nanos, fmt)

    def __neg__(self) -> Quantity:
        return Quantity(-self.nanos, self.format)

    # -- Cmp: by value only ---------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def sign(self) -> int:
        return (self.nanos > 0) - (self.nanos < 0)

    def scaled_value(self, scale: int) -> int:
        """``ScaledValue``: ``q / 10^scale`` rounded up, away from zero."""
        shift = scale + 9
        factor: int = 10 ** abs(shift)
        if shift <= 0:
            return self.nanos * factor
        whole, rest = divmod(abs(self.nanos), factor)
        whole += rest != 0
        return whole if self.nanos >= 0 else -whole

    def value(self) -> int:
        """``Value``: the value rounded up (away from zero) to a whole number."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """``MilliValue``: ``ceil(q * 1000)``."""
        return self.scaled_value(-3)


ZERO: Final = Quantity(0)


# --- ParseQuantity ------------------------------------------------------------------------


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: sign, the number as written (sign and leading zeros
    included), its integer digits without leading zeros, its fraction digits, and the
    suffix.

    Raises:
        QuantityError: ``ErrFormatWrong``.
    """
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while True:  # leading zeros
        if pos >= end:
            return positive, "0", "0", "", ""
        if text[pos] != "0":
            break
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos]
    if pos >= end:
        return positive, text, num or "0", "", ""
    num = num or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_WRONG)  # a non-digit after the exponent's digits
    return positive, value, num, denom, text[suffix_start:]


def _int32(value: int) -> int:
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def _interpret(suffix: str) -> tuple[int, int, str]:
    """``quantitySuffixer.interpret``: base, exponent and format of a suffix.

    Raises:
        QuantityError: ``ErrSuffix``.
    """
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in ("+", "-") else digits
        if body and all(c in _DIGITS for c in body):
            exponent = int(digits)
            if -(1 << 63) <= exponent <= _MAX_INT64:  # strconv.ParseInt(..., 10, 64)
                return 10, _int32(exponent), DECIMAL_EXPONENT
    raise QuantityError(SUFFIX)


def _go_rem(a: int, b: int) -> int:
    """Go's ``%``: the remainder takes the dividend's sign."""
    r = abs(a) % b
    return -r if a < 0 else r


def parse(text: str) -> Quantity:
    """``ParseQuantity``.

    Raises:
        QuantityError: with ``ErrFormatWrong``, ``ErrSuffix`` or ``ErrNumeric``'s text.
    """
    if not text:
        raise QuantityError(FORMAT_WRONG)
    if text == "0":
        return Quantity(0, DECIMAL_SI, "0")
    positive, value, num, denom, suffix = _scan(text)
    base, exponent, fmt = _interpret(suffix)

    precision, scale, mantissa = 0, 0, 1
    if fmt == BINARY_SI:
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - exponent * 3 // 10 - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        shifted = num + denom
        digits = int(shifted)
        if scale > _MAX_EXPONENT and digits:
            raise QuantityError(NUMERIC)  # beyond what this port holds (see _MAX_EXPONENT)
        if scale >= -9:
            result = digits * mantissa
            if result <= _MAX_INT64:  # int64Multiply did not overflow
                nanos = (result if positive else -result) * 10 ** (scale + 9) if result else 0
                if fmt == BINARY_SI:
                    kept = exponent % 10 == 0 and digits & 0x07 != 0
                else:
                    kept = (
                        _go_rem(scale, 3) == 0 and not shifted.endswith("000") and shifted[0] != "0"
                    )
                return Quantity(nanos, fmt, text if kept else "")

    if len(value) > _MAX_DIGITS or (base == 10 and exponent > _MAX_EXPONENT):
        raise QuantityError(NUMERIC)  # beyond what this port holds (see _MAX_EXPONENT)
    try:
        amount = Fraction(Decimal(value))
    except InvalidOperation:
        raise QuantityError(NUMERIC) from None  # no digit (".e-10"): inf.Dec refuses it too
    if base == 2:
        amount *= 2**exponent
    elif exponent >= -3 * _MAX_EXPONENT:
        amount *= Fraction(10) ** exponent
    elif amount:
        amount = Fraction(1 if amount > 0 else -1, 10**12)  # below a nano: rounds up to 1n
    negative = amount < 0
    amount = abs(amount)
    nanos = math.ceil(amount * _NANO)  # round up (away from zero) to the nano
    if fmt == BINARY_SI and nanos > _MAX_INT64 * _NANO:
        nanos = _MAX_INT64 * _NANO
    if fmt == BINARY_SI and 0 < nanos < _NANO:
        fmt = DECIMAL_SI
    return Quantity(-nanos if negative else nanos, fmt)


# --- MarshalJSON / String -------------------------------------------------------------------


def _remove_factors(value: int, factor: int) -> tuple[int, int]:
    times = 0
    while value >= factor and value % factor == 0:
        value //= factor
        times += 1
    return value, times


def _canonical(nanos: int, fmt: str) -> str:
    """``CanonicalizeBytes``: the largest suffix that loses no precision."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt == BINARY_SI:
        if magnitude < 1024 * _NANO:
            fmt = DECIMAL_SI  # between -1024 and 1024: no rounding
        elif magnitude % _NANO:
            fmt = DECIMAL_SI  # a fraction: don't lose precision
        else:
            amount, power = _remove_factors(magnitude // _NANO, 1024)
            return f"{sign}{amount}{_BINARY_BY_EXPONENT.get(power * 10, '')}"
    elif fmt not in (DECIMAL_SI, DECIMAL_EXPONENT):
        fmt = DECIMAL_EXPONENT
    amount, times = _remove_factors(magnitude, 10)
    exponent = times - 9
    while exponent % 3:
        amount *= 10
        exponent -= 1
    if fmt == DECIMAL_EXPONENT:
        suffix = f"e{exponent}" if exponent else ""
    else:
        suffix = _DECIMAL_BY_EXPONENT.get(exponent, "")  # kube drops an unknown suffix
    return f"{sign}{amount}{suffix}"


# --- UnmarshalJSON --------------------------------------------------------------------------


def _number_text(value: int | float) -> str:
    """The text a JSON number had, as near as a decoded one tells (ints exactly; floats
    by their shortest repr, which is what Python clients send)."""
    if isinstance(value, int):
        return str(value)
    return repr(value)


def from_json(value: Any) -> Quantity:
    """``UnmarshalJSON`` of a decoded JSON value: a string (spaces trimmed), a number (by
    its text), ``null`` (zero); anything else is not a quantity.

    Raises:
        QuantityError: with ``ParseQuantity``'s message.
    """
    if value is None:
        return ZERO
    if isinstance(value, str):
        return parse(value.strip())
    if isinstance(value, bool):
        return parse("true" if value else "false")
    if isinstance(value, int | float):
        return parse(_number_text(value))
    raise QuantityError(FORMAT_WRONG)  # an object or array reaches ParseQuantity raw


def canonical(value: Any) -> str:
    """What kube stores for a quantity sent as ``value`` (``MarshalJSON`` after
    ``UnmarshalJSON``).

    Raises:
        QuantityError: ``value`` is not a quantity.
    """
    return str(from_json(value))
