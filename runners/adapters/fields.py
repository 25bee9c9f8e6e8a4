"""Typed reads from untrusted decoded JSON: numbers, counts, strings, nested objects.

Every refusal is a FormatProblem naming the field's path. Pure; imports no Django.
"""

from __future__ import annotations

import math
from typing import Any, Literal, overload

from runners.adapters.documents import describe
from runners.adapters.errors import FormatProblem

# Counts beyond this are not real request or token counts, and would not fit a bigint column.
MAX_COUNT = 2**63 - 1


class Record:
    """A JSON object plus the path that led to it, e.g. `benchmarks[0].metrics`. Each read
    with `required=True` raises rather than return None, and says so in its type."""

    def __init__(self, data: Any, path: str = ""):
        if not isinstance(data, dict):
            raise FormatProblem(f"{path or 'the document'} is {describe(data)}, expected an object")
        self.data = data
        self.path = path

    def where(self, key: str) -> str:
        """The full path of `key`, for messages."""
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    @overload
    def number(self, key: str, *, required: Literal[True]) -> float: ...
    @overload
    def number(self, key: str, *, required: bool = False) -> float | None: ...
    def number(self, key: str, *, required: bool = False) -> float | None:
        """A finite number; None when absent or null (never 0)."""
        value = self._value(key, required)
        return None if value is None else finite(value, self.where(key))

    @overload
    def count(self, key: str, *, required: Literal[True]) -> int: ...
    @overload
    def count(self, key: str, *, required: bool = False) -> int | None: ...
    def count(self, key: str, *, required: bool = False) -> int | None:
        """A non-negative whole number (an integral float such as 396.0 is accepted)."""
        value = self._value(key, required)
        return None if value is None else whole(value, self.where(key))

    @overload
    def text(self, key: str, *, required: Literal[True]) -> str: ...
    @overload
    def text(self, key: str, *, required: bool = False) -> str | None: ...
    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self._value(key, required)
        if value is None or isinstance(value, str):
            return value
        raise FormatProblem(f"{self.where(key)} is {describe(value)}, expected a string")

    @overload
    def child(self, key: str, *, required: Literal[True]) -> Record: ...
    @overload
    def child(self, key: str, *, required: bool = False) -> Record | None: ...
    def child(self, key: str, *, required: bool = False) -> Record | None:
        """The nested object at `key`, or None when absent or null."""
        value = self._value(key, required)
        return None if value is None else Record(value, self.where(key))

    @overload
    def items(self, key: str, *, required: Literal[True]) -> list[Any]: ...
    @overload
    def items(self, key: str, *, required: bool = False) -> list[Any] | None: ...
    def items(self, key: str, *, required: bool = False) -> list[Any] | None:
        """The list at `key`, or None when absent or null."""
        value = self._value(key, required)
        if value is None or isinstance(value, list):
            return value
        raise FormatProblem(f"{self.where(key)} is {describe(value)}, expected a list")

    def _value(self, key: str, required: bool) -> Any:
        value = self.data.get(key)
        if value is None and required:
            raise FormatProblem(f"{self.where(key)} is missing")
        return value


def finite(value: Any, where: str) -> float:
    """`value` as a finite float; booleans, strings, NaN and infinities are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatProblem(f"{where} is {describe(value)}, expected a number")
    try:
        number = float(value)
    except OverflowError:
        raise FormatProblem(f"{where} is too large to be a real measurement") from None
    if not math.isfinite(number):
        raise FormatProblem(f"{where} is {value}, expected a finite number")
    return number


def whole(value: object, where: str) -> int:
    """`value` as a count: a whole number from 0 to MAX_COUNT."""
    if isinstance(value, bool) or not isinstance(value, int):
        number = finite(value, where)
        if not number.is_integer():
            raise FormatProblem(f"{where} is {number}, expected a whole number")
        value = int(number)
    # Never format a huge int into the message: str() of a 5000-digit int raises ValueError.
    if value < 0:
        raise FormatProblem(f"{where} is negative, expected a count")
    if value > MAX_COUNT:
        raise FormatProblem(f"{where} is too large to be a real count")
    return value
