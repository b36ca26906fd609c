"""Canonical quantities, as the API server stores them (apimachinery Quantity.String())."""

from __future__ import annotations

from decimal import Decimal

import pytest

from generator import quantity


@pytest.mark.parametrize("given,stored", [
    ("12000m", "12"), ("1024Mi", "1Gi"), ("1800Gi", "1800Gi"), ("192", "192"), ("0.5", "500m"),
    ("1.5Gi", "1536Mi"), ("100m", "100m"), ("1000", "1k"), ("1536", "1536"), ("0.1m", "100u"),
    ("1e3", "1e3"), ("1E", "1E"), ("2048Ki", "2Mi"), ("512Ki", "512Ki"), ("1023", "1023"), ("0", "0"),
    ("62500m", "62500m"), ("1.5", "1500m"), ("0.000000001", "1n"), ("0.0000000001", "1n"), (64, "64"),
])
def test_canonical_form(given: str | int, stored: str) -> None:
    assert quantity.normalise(given) == stored


def test_binary_below_1024_bytes_is_decimal() -> None:
    assert quantity.canonical(Decimal(512), "BinarySI") == "512"


@pytest.mark.parametrize("bad", ["", "1.2.3", "12 Gi", "1Gb", "x", "--1", True])
def test_rejects_non_quantities(bad: object) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(bad)  # type: ignore[arg-type]


def test_a_remembered_quantity_is_still_refused_as_a_boolean() -> None:
    """parse and canonical remember their answers by type too: 1 parsed first must not let True
    (which equals 1) through."""
    assert quantity.parse(1) == (Decimal(1), "DecimalSI")
    with pytest.raises(quantity.QuantityError):
        quantity.parse(True)
