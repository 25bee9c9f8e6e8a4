"""Turning raw tool output into documents: bytes to text, JSON, JSON lines, XML.

Pure: no file or network I/O; every failure is a FormatProblem.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from runners import jsonlimits
from runners.adapters.errors import FormatProblem, excerpt


def decode(text: str | bytes) -> str:
    """Text of the output: UTF-8 (a BOM is dropped); binary data is refused."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise FormatProblem(
                f"not UTF-8 text (byte 0x{text[error.start]:02x} at offset {error.start})"
            ) from None
    if not isinstance(text, str):
        raise FormatProblem(f"expected text or bytes, got {type(text).__name__}")
    text = text.removeprefix("\ufeff")
    nul = text.find("\x00")
    if nul >= 0:
        raise FormatProblem(f"binary data, not tool output (NUL character at offset {nul})")
    if not text.strip():
        raise FormatProblem("empty output")
    return text


def load_json(text: str) -> Any:
    """One JSON document within jsonlimits. NaN and Infinity load as floats; readers refuse
    them per field."""
    try:
        jsonlimits.check_depth(text)
        value = json.loads(text)
        jsonlimits.check_storable(value)
    except jsonlimits.JsonLimitError as error:
        raise FormatProblem(f"JSON refused ({error})") from None
    except json.JSONDecodeError as error:
        raise FormatProblem(f"not valid JSON ({error.msg} at line {error.lineno})") from None
    except ValueError as error:  # e.g. an integer literal over Python's digit limit
        raise FormatProblem(f"not valid JSON ({error})") from None
    return value


def load_json_records(text: str) -> list[tuple[str, Any]]:
    """One JSON document, or JSON lines (one document per line), each with where it came from.

    A single document gets the place "" and line N gets "line N", so messages can point at it.
    """
    try:
        return [("", load_json(text))]
    except FormatProblem as problem:
        whole_problem = problem
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) < 2:
        raise whole_problem
    records = []
    for number, line in lines:
        try:
            records.append((f"line {number}", load_json(line)))
        except FormatProblem as problem:
            # A first line that is not JSON means the whole text is one broken document.
            if not records:
                raise whole_problem from None
            raise FormatProblem(f"line {number}: {problem}") from None
    return records


def load_xml(text: str) -> ET.Element:
    """An XML document without entity declarations (they are the billion-laughs vector)."""
    if "<!ENTITY" in text:
        raise FormatProblem("XML with entity declarations is refused")
    try:
        return ET.fromstring(text)  # noqa: S314 - entities refused above; expat fetches no DTD
    except ET.ParseError as error:
        raise FormatProblem(f"not well-formed XML ({error})") from None
    except RecursionError:
        raise FormatProblem("XML nested too deeply") from None


def first_line(text: str) -> str:
    """The first non-blank line, stripped; "" when there is none."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def describe(value: Any) -> str:
    """What a JSON value is, for messages ("a list", "the string 'x'")."""
    if isinstance(value, str):
        return f"the string {excerpt(value)}"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    names = {dict: "an object", list: "a list", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)
