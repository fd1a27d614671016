"""Smaller published JSON schemas: the same constraints with fewer bytes of an agent's context.

Pydantic adds a generated `title` to every schema and spells optional values as
`anyOf: [{type: X}, {type: null}]`. Both are dropped or folded here; nothing that constrains a value
is removed.
"""

from __future__ import annotations

from typing import Any


def compact_schema(node: Any, *, output: bool = False, in_properties: bool = False) -> Any:
    """`output=True` also drops `additionalProperties: false` and `required`, which describe our own
    models' checks, not anything a client must do."""
    if isinstance(node, list):
        return [compact_schema(item, output=output) for item in node]
    if not isinstance(node, dict):
        return node
    if in_properties:  # keys are property names, every value is a schema
        return {name: compact_schema(schema, output=output) for name, schema in node.items()}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "default" and value is None:  # implied: an optional property defaults to absent/null
            continue
        if output and (key == "additionalProperties" and value is False or key == "required"):
            continue  # a result may leave a property out (task objects, marks): none is required
        if key in ("properties", "$defs"):
            out[key] = compact_schema(value, output=output, in_properties=True)
        else:
            out[key] = compact_schema(value, output=output)
    options = out.get("anyOf")
    if isinstance(options, list) and options and all(_is_bare_type(o) for o in options):
        out.pop("anyOf")
        types = [o["type"] for o in options]
        out["type"] = types[0] if len(types) == 1 else types
    elif isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        # `X or null` where X has constraints: fold the null into X's type when X names one type.
        other = options[0] if options[1] == {"type": "null"} else options[1]
        if isinstance(other.get("type"), str) and "$ref" not in other:
            out.pop("anyOf")
            out.update({**other, "type": [other["type"], "null"]})
            if "enum" in other:  # an enum constrains every type: null must be one of its values
                out["enum"] = [*other["enum"], None]
    return out


def _is_bare_type(option: Any) -> bool:
    return isinstance(option, dict) and set(option) == {"type"} and isinstance(option["type"], str)
