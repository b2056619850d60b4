"""Money at the client's edge, exactly.

The spec's amounts are ``{ usdc: number }``: a stablecoin amount in dollars with 6 decimal places.
Inside the client an amount is an ``int`` of base units (``amount_units``); callers see and give
``Decimal``. Conversions go through decimal text, never through float arithmetic: a ``float``
argument is read through its shortest ``repr`` (``0.1`` is exactly 100000 units, and ``0.1 + 0.2``
is refused for having more than 6 decimals instead of being rounded), as the TypeScript client
reads a ``number``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

USDC_DECIMALS = 6
_SCALE: int = 10**USDC_DECIMALS
#: The ledger's amounts are u64.
MAX_AMOUNT_UNITS: int = 2**64 - 1

_DECIMAL_TEXT = re.compile(r"^(\d+)(?:\.(\d+))?$")

#: What an argument may be: ``Decimal("0.05")``, ``"0.05"``, ``5`` or (read through its repr) ``0.05``.
UsdcAmount = Decimal | int | str | float


class MoneyFormatError(ValueError):
    """An amount that is not a non-negative decimal with at most 6 decimal places (or is too large)."""


@dataclass(frozen=True, slots=True)
class Usdc:
    """The spec's money object ``{ usdc }``: ``usdc`` is an exact ``Decimal`` (``Usdc(Decimal("0.05"))``)."""

    usdc: Decimal

    @property
    def units(self) -> int:
        """The amount in base units (6 decimals): ``Usdc(Decimal("0.05")).units == 50000``."""
        return to_units(self.usdc)

    @classmethod
    def of(cls, amount: UsdcAmount) -> Usdc:
        """An exact ``Usdc`` from any accepted amount (refused beyond 6 decimals)."""
        return cls(units_to_usdc(to_units(amount)))

    @classmethod
    def from_units(cls, units: int) -> Usdc:
        return cls(units_to_usdc(units))

    def __str__(self) -> str:
        return f"{units_to_text(self.units)} usdc"


def decimal_text_to_units(text: str) -> int:
    """``"0.05"`` → ``50000``. Refuses signs, exponents, more than 6 decimals and amounts above a u64."""
    match = _DECIMAL_TEXT.match(text)
    if match is None:
        raise MoneyFormatError(f"not a non-negative decimal amount: {text!r}")
    whole: str = match.group(1)
    fraction: str = match.group(2) or ""
    if len(fraction) > USDC_DECIMALS:
        raise MoneyFormatError(f"more than {USDC_DECIMALS} decimal places: {text}")
    units = int(whole) * _SCALE + int(fraction.ljust(USDC_DECIMALS, "0"))
    if units > MAX_AMOUNT_UNITS:
        raise MoneyFormatError(f"amount too large: {text}")
    return units


def to_units(amount: object, field: str = "usdc") -> int:
    """Any accepted amount → base units, exactly, or ``MoneyFormatError`` / ``TypeError`` naming ``field``."""
    if isinstance(amount, bool) or not isinstance(amount, (Decimal, int, str, float)):
        raise TypeError(f"{field} must be a Decimal, int, str or float amount, got {type(amount).__name__}")
    if isinstance(amount, str):
        return _checked(decimal_text_to_units(amount.strip()), field, amount)
    if isinstance(amount, float):
        if not math.isfinite(amount):
            raise MoneyFormatError(f"{field}: not a finite amount: {amount!r}")
        if amount < 0 or math.copysign(1.0, amount) < 0:
            raise MoneyFormatError(f"{field}: negative amount: {amount!r}")
        # repr is the shortest text that reads back as the same float: the amount the caller wrote.
        return _from_decimal(Decimal(repr(amount)), field)
    if isinstance(amount, int):
        if amount < 0:
            raise MoneyFormatError(f"{field}: negative amount: {amount}")
        return _checked(amount * _SCALE, field, amount)
    return _from_decimal(amount, field)


def _from_decimal(value: Decimal, field: str) -> int:
    if not value.is_finite():
        raise MoneyFormatError(f"{field}: not a finite amount: {value}")
    if value.is_signed():
        raise MoneyFormatError(f"{field}: negative amount: {value}")
    try:
        scaled = value.scaleb(USDC_DECIMALS)
        units = int(scaled)
    except (InvalidOperation, OverflowError) as error:
        raise MoneyFormatError(f"{field}: not an amount: {value}") from error
    if scaled != units:
        raise MoneyFormatError(f"{field}: more than {USDC_DECIMALS} decimal places: {value}")
    return _checked(units, field, value)


def _checked(units: int, field: str, shown: object) -> int:
    if units > MAX_AMOUNT_UNITS:
        raise MoneyFormatError(f"{field}: amount too large: {shown}")
    return units


def units_to_text(units: int) -> str:
    """``50000`` → ``"0.05"`` (shortest form, no exponent)."""
    sign = "-" if units < 0 else ""
    whole, fraction = divmod(abs(units), _SCALE)
    digits = str(fraction).rjust(USDC_DECIMALS, "0").rstrip("0")
    return f"{sign}{whole}.{digits}" if digits else f"{sign}{whole}"


def units_to_usdc(units: int) -> Decimal:
    """``50000`` → ``Decimal("0.05")``: exact for every amount (no float in between)."""
    return Decimal(units_to_text(units))


def usdc_from_wire(value: object, field: str = "usdc") -> Usdc:
    """A gateway answer's ``{ "usdc": 0.05 }`` (numbers parsed as ``Decimal``/``int``) → ``Usdc``."""
    if not isinstance(value, dict) or "usdc" not in value:
        raise TypeError(f"{field} is not a money object {{usdc}}: {value!r}")
    amount = value["usdc"]
    if isinstance(amount, bool) or not isinstance(amount, (Decimal, int)):
        raise TypeError(f"{field}.usdc is not a number: {amount!r}")
    return Usdc.from_units(to_units(amount, field))
