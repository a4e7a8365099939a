"""The four tools of an episode, as OpenAI function-calling schemas, and tool calls.

``file_editor`` edits the episode's private pass directory, ``pass_evaluator`` runs the
real evaluation and answers with three-stage diagnostics, ``inspect_graph`` shows a
task graph and how Inductor fuses it, ``submit`` ends the episode (the final reward is
a fresh evaluation with full timing). :data:`TOOLS` is what ``reset`` hands out and
what trajectories keep; :func:`parse_call` checks a call's arguments against it, so a
malformed call becomes a message for the model rather than an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["TOOLS", "TOOL_NAMES", "ToolCall", "parse_call"]

_EDITOR = {
    "type": "function",
    "function": {
        "name": "file_editor",
        "description": (
            "View and edit files of your pass directory (pass_dir), and only there. "
            "Paths are relative to pass_dir ('MyPass.py', 'kernels.py', "
            "'sorted_output_pass_rule_names.json'). Commands: view (a file with line numbers, "
            "or '.' to list pass_dir), create (write a whole file; replaces an existing one), "
            "str_replace (replace the one occurrence of old_str by new_str), insert (new_str "
            "after line insert_line; 0 inserts at the top), undo_edit (revert the last edit "
            "of the file)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                },
                "path": {"type": "string", "description": "file path relative to pass_dir"},
                "file_text": {"type": "string", "description": "create: the file's content"},
                "old_str": {"type": "string", "description": "str_replace: exact text to replace"},
                "new_str": {"type": "string", "description": "str_replace / insert: new text"},
                "insert_line": {"type": "integer", "description": "insert: line to insert after"},
                "view_range": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "view: [first_line, last_line] (-1: to the end)",
                },
            },
            "required": ["command", "path"],
        },
    },
}

_EVALUATOR = {
    "type": "function",
    "function": {
        "name": "pass_evaluator",
        "description": (
            "Evaluate the passes of pass_dir on the task's graphs with the real harness (an "
            "isolated process, integrity checks, correctness over the tolerance sweep, timing). "
            "Answers in three stages: matching (which passes matched where; why a pattern did "
            "not match), correctness (per graph and dtype: status, max diff, first passing "
            "tolerance t), performance (speedups, ES_t, the aggregated score AS)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "graphs": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "only these graphs (names from the task's list); default: all",
                }
            },
            "required": [],
        },
    },
}

_INSPECT = {
    "type": "function",
    "function": {
        "name": "inspect_graph",
        "description": (
            "Show one of the task's graphs: its inputs, every operation with the shape and "
            "dtype it produces, and how TorchInductor compiles it (kernel count, which "
            "operations it fuses into one kernel)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "graph": {"type": "string", "description": "a graph name from the task's list"},
                "max_nodes": {
                    "type": "integer",
                    "description": "show at most this many operations (default 200)",
                },
            },
            "required": ["graph"],
        },
    },
}

_SUBMIT = {
    "type": "function",
    "function": {
        "name": "submit",
        "description": (
            "Submit pass_dir as it is now and end the episode. The final reward is a fresh "
            "evaluation of the submitted passes with full timing."
        ),
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}

TOOLS: tuple[dict[str, Any], ...] = (_EDITOR, _EVALUATOR, _INSPECT, _SUBMIT)
"""The tool schemas, in the OpenAI ``tools`` format."""
TOOL_NAMES: tuple[str, ...] = tuple(t["function"]["name"] for t in TOOLS)

_TYPES = {
    "string": (str,),
    "integer": (int,),
    "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool, as the model sent it: ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"

    @classmethod
    def from_message(cls, call: Any) -> ToolCall:
        """From an OpenAI ``tool_calls`` entry (a dict or the client's object), or a flat
        ``{"id", "name", "arguments"}`` one (provider-agnostic frameworks)."""
        get = call.get if isinstance(call, dict) else lambda k, d=None: getattr(call, k, d)
        function = get("function") or call
        fget = (
            function.get
            if isinstance(function, dict)
            else lambda k, d=None: getattr(function, k, d)
        )
        arguments = fget("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments) if arguments is not None else "{}"
        return cls(str(get("id") or ""), str(fget("name") or ""), arguments)

    def to_message(self) -> dict[str, Any]:
        """The ``tool_calls`` entry of an assistant message."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


def parse_call(call: ToolCall) -> tuple[dict[str, Any], str | None]:
    """``(arguments, None)`` for a well-formed call of a known tool, else ``({}, problem)``:
    an unknown tool, arguments that are not a JSON object, a missing or unknown argument,
    or one of the wrong type."""
    schema = next((t["function"] for t in TOOLS if t["function"]["name"] == call.name), None)
    if schema is None:
        return {}, f"unknown tool {call.name!r}; the tools are {', '.join(TOOL_NAMES)}"
    text = call.arguments.strip() or "{}"
    try:
        args = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, (
            f"the arguments of {call.name} are not valid JSON ({exc.msg} at character "
            f"{exc.pos}); send one JSON object"
        )
    if not isinstance(args, dict):
        return {}, f"the arguments of {call.name} must be a JSON object, got {type(args).__name__}"
    params = schema["parameters"]
    properties = params["properties"]
    unknown = sorted(set(args) - set(properties))
    if unknown:
        known = ", ".join(properties) or "none"
        return {}, f"{call.name} takes no argument {unknown[0]!r} (its arguments: {known})"
    missing = [k for k in params["required"] if k not in args]
    if missing:
        return {}, f"{call.name} needs the argument {missing[0]!r}"
    for key, value in args.items():
        spec = properties[key]
        kind = _TYPES[spec["type"]]
        if value is None or isinstance(value, bool) or not isinstance(value, kind):
            return {}, f"argument {key!r} of {call.name} must be of type {spec['type']}"
        if "enum" in spec and value not in spec["enum"]:
            return {}, f"argument {key!r} of {call.name} must be one of {spec['enum']}"
        if spec["type"] == "array":
            item = _TYPES[spec["items"]["type"]]
            if any(isinstance(v, bool) or not isinstance(v, item) for v in value):
                return (
                    {},
                    f"argument {key!r} of {call.name} must be a list of {spec['items']['type']}",
                )
    return args, None
