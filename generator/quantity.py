"""Kubernetes resource quantities: parse, and format in the API server's canonical form.

The API server rewrites quantities it stores (`12000m` becomes `12`, `1024Mi` becomes `1Gi`).
Emitting anything else makes Argo CD report the object OutOfSync forever, so every quantity
fleetgen writes goes through `canonical()`, which follows apimachinery's `Quantity.String()`.
"""

from __future__ import annotations

import functools
import re
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Literal

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]

_PATTERN = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_BINARY_SUFFIX = sorted(((exp, suffix) for suffix, exp in _BINARY.items()), reverse=True)


MAX_EXPONENT = 64
"""Larger exponents cannot give a quantity Kubernetes accepts (int64 scaled by 10^-9 at most)."""


class QuantityError(ValueError):
    """Raised for text that is not a Kubernetes quantity."""


@functools.lru_cache(maxsize=4096, typed=True)  # typed: True (refused) is not 1
def parse(text: str | int) -> tuple[Decimal, Format]:
    """Return the exact value and the format the API server would keep for it (once per distinct
    text: every team's objects carry the same few quantities)."""
    if isinstance(text, bool):
        raise QuantityError("a quantity must be a number or a string such as 192, 500m or 1800Gi")
    if isinstance(text, int):
        return Decimal(text), "DecimalSI"
    match = _PATTERN.match(text)
    if not match:
        raise QuantityError(f"{text!r} is not a Kubernetes quantity (examples: 192, 500m, 1800Gi, 1.5T)")
    number, suffix = match.group(1), match.group(2) or ""
    with localcontext() as ctx:
        ctx.prec = 80
        value = Decimal(number)
        if suffix in _BINARY:
            return value * (Decimal(2) ** _BINARY[suffix]), "BinarySI"
        if len(suffix) > 1 and suffix[0] in "eE":  # an exponent; a bare "E" is exa
            exponent = int(suffix[1:])
            if abs(exponent) > MAX_EXPONENT:  # 1e999999999 would exhaust Decimal, not just overflow
                raise QuantityError(f"{text!r}: exponent {exponent} is out of range (a Kubernetes quantity holds "
                                    "at most 2^63-1, i.e. about 9.2e18)")
            return value.scaleb(exponent), "DecimalExponent"
        return value.scaleb(_DECIMAL[suffix]), "DecimalSI"


def value_of(text: str | int) -> Decimal:
    """The exact numeric value of a quantity."""
    return parse(text)[0]


@functools.lru_cache(maxsize=4096, typed=True)
def canonical(value: Decimal | int, fmt: Format = "DecimalSI") -> str:
    """Format `value` as the API server stores it: no fraction digits, the largest suffix."""
    with localcontext() as ctx:
        ctx.prec = 80
        value = Decimal(value)
        # Anything below a nano unit is rounded up, as apimachinery does.
        value = (value.scaleb(9).to_integral_value(rounding=ROUND_CEILING)).scaleb(-9)
        if value == 0:
            return "0"
        if fmt == "BinarySI" and abs(value) >= 1024 and value == value.to_integral_value():
            whole = int(value)
            for exp, suffix in _BINARY_SUFFIX:
                if whole % (1 << exp) == 0:
                    return f"{whole >> exp}{suffix}"
            return str(whole)
        sign = "-" if value < 0 else ""
        mantissa = int(abs(value).scaleb(9))  # integer count of nano units
        exp = -9
        while exp < 18 and mantissa % 1000 == 0:
            mantissa //= 1000
            exp += 3
        if fmt == "DecimalExponent":
            return f"{sign}{mantissa}" + (f"e{exp}" if exp else "")
        return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exp]}"


def normalise(text: str | int) -> str:
    """Canonical text for a quantity given in any valid form."""
    value, fmt = parse(text)
    return canonical(value, fmt)
