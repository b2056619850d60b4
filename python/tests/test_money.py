"""Money is exact: base units inside, Decimal at the edge, never float arithmetic."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from agent_payment_gateway import MoneyFormatError, Usdc, wire_json
from agent_payment_gateway.money import (
    MAX_AMOUNT_UNITS,
    decimal_text_to_units,
    to_units,
    units_to_text,
    units_to_usdc,
    usdc_from_wire,
)


@pytest.mark.parametrize(
    ("amount", "units"),
    [
        (Decimal("0.05"), 50_000),
        (Decimal("1.000001"), 1_000_001),
        (Decimal("1.500000000"), 1_500_000),
        (Decimal("1E+2"), 100_000_000),
        ("0.1", 100_000),
        ("12345678901.000001", 12_345_678_901_000_001),
        (5, 5_000_000),
        (0.1, 100_000),
        (1e-6, 1),
        (2.5, 2_500_000),
    ],
)
def test_amounts_convert_to_exact_base_units(amount: Decimal | str | int | float, units: int) -> None:
    assert to_units(amount) == units


def test_a_float_is_read_through_its_shortest_repr_and_0_1_plus_0_2_is_refused() -> None:
    # 0.30000000000000004 has more than 6 decimals: refused, never rounded to 0.3.
    with pytest.raises(MoneyFormatError, match="decimal places"):
        to_units(0.1 + 0.2)


@pytest.mark.parametrize(
    "amount",
    [Decimal("0.0000001"), "1.1234567", Decimal("-1"), -0.0, "-1", "1e2", " ", "abc", float("nan"), float("inf")],
)
def test_malformed_or_negative_amounts_are_refused(amount: Decimal | str | float) -> None:
    with pytest.raises(MoneyFormatError):
        to_units(amount)


def test_amounts_above_a_u64_are_refused() -> None:
    assert to_units(Decimal(MAX_AMOUNT_UNITS).scaleb(-6)) == MAX_AMOUNT_UNITS
    with pytest.raises(MoneyFormatError, match="too large"):
        to_units(Decimal(MAX_AMOUNT_UNITS + 1).scaleb(-6))


@pytest.mark.parametrize("amount", [True, None, [1], b"1"])
def test_things_that_are_not_amounts_are_type_errors(amount: object) -> None:
    with pytest.raises(TypeError):
        to_units(amount)


def test_units_round_trip_through_text_and_decimal_exactly() -> None:
    rng = random.Random(7)
    for _ in range(2_000):
        units = rng.randrange(0, MAX_AMOUNT_UNITS)
        text = units_to_text(units)
        assert decimal_text_to_units(text) == units
        assert to_units(units_to_usdc(units)) == units
        assert Usdc.from_units(units).units == units


def test_text_is_the_shortest_form() -> None:
    assert [units_to_text(units) for units in (0, 1, 50_000, 2_000_000, 10_000_000)] == [
        "0",
        "0.000001",
        "0.05",
        "2",
        "10",
    ]
    assert str(Usdc.of("0.050")) == "0.05 usdc"
    assert Usdc.of(0.05) == Usdc(Decimal("0.05"))


def test_gateway_money_is_read_as_decimal_and_written_as_plain_digits() -> None:
    answer = wire_json.loads('{"usdc":12345678901.000001,"n":2}')
    assert usdc_from_wire(answer).usdc == Decimal("12345678901.000001")
    assert usdc_from_wire({"usdc": 2}).usdc == Decimal(2)
    assert wire_json.dumps({"usdc": Decimal("1E+2"), "b": Decimal("0.050"), "c": [None, True, "é"]}) == (
        '{"usdc":100,"b":0.05,"c":[null,true,"é"]}'
    )
    with pytest.raises(TypeError):
        usdc_from_wire({"usdc": "1"})
    with pytest.raises(ValueError, match="NaN"):
        wire_json.loads('{"usdc": NaN}')
