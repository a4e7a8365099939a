"""The episode's tools, each registered once with its schema and its handler; tool calls.

A tool is a :class:`Tool` subclass: its name, its OpenAI function-calling description
and parameters, its handler :meth:`Tool.run` and whether it ends the episode, in one
place, registered in :data:`TOOL_REGISTRY` (the one registry mechanism,
:class:`passnet.registry.Registry`) by :func:`register_tool`. ``file_editor`` edits the
episode's private pass directory, ``pass_evaluator`` runs the real evaluation and answers
with three-stage diagnostics, ``inspect_graph`` shows a task graph and how Inductor fuses
it, ``submit`` ends the episode (the final reward is a fresh evaluation with full
timing). :data:`TOOLS` (the schemas of the registered tools) is what ``reset`` hands out
and what trajectories keep. :func:`parse_call` checks a call against its tool's schema, so
a malformed call or an unknown tool becomes a message for the model rather than an
exception; :func:`get_tool` finds a tool by lookup, and a name that is not registered is
never run as any tool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from passnet.agent._diagnostics import render_evaluation
from passnet.agent._inspect import inspect_graph
from passnet.errors import RegistryError
from passnet.registry import Registry

if TYPE_CHECKING:
    from passnet.agent._env import PassEnv
    from passnet.agent._evaluator import Evaluation

__all__ = [
    "TOOLS",
    "TOOL_NAMES",
    "TOOL_REGISTRY",
    "Tool",
    "ToolCall",
    "get_tool",
    "parse_call",
    "register_tool",
]


class Tool:
    """One tool of an episode: its schema and its handler together.

    Subclasses set ``name``, ``description`` and ``parameters`` (a JSON schema object with
    ``properties`` and ``required``), implement :meth:`run`, and set ``ends_episode`` when a
    call ends the episode (``submit``).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    ends_episode: ClassVar[bool] = False

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The OpenAI ``tools`` entry of this tool."""
        return {
            "type": "function",
            "function": {
                "name": cls.name,
                "description": cls.description,
                "parameters": cls.parameters,
            },
        }

    def run(self, env: PassEnv, args: dict[str, Any]) -> tuple[str, Evaluation | None]:
        """Carry out a well-formed call on ``env``'s episode: the observation's text and the
        evaluation it ran (or None). A call that cannot be done raises
        :class:`~passnet.agent.ToolError` (its message is the observation)."""
        raise NotImplementedError


TOOL_REGISTRY: Registry[type[Tool]] = Registry("agent tool", Tool)
"""Tool name -> :class:`Tool` subclass."""


def register_tool(cls: type[Tool]) -> type[Tool]:
    """Class decorator: register a tool under its ``name``; its schema must be complete and
    its handler implemented."""
    for attr in ("name", "description", "parameters"):
        if not hasattr(cls, attr):
            raise RegistryError(f"agent tool {cls.__name__} has no {attr}")
    if cls.run is Tool.run:
        raise RegistryError(f"agent tool {cls.name!r} has no handler (implement run)")
    params = cls.parameters
    if params.get("type") != "object" or not set(params.get("required", ())) <= set(
        params.get("properties", {})
    ):
        raise RegistryError(
            f"agent tool {cls.name!r}: parameters must be an object schema whose required "
            "arguments are among its properties"
        )
    TOOL_REGISTRY.add(cls.name, cls)
    return cls


def get_tool(name: str) -> type[Tool] | None:
    """The registered tool called ``name``, or None. Only registered names are looked up:
    a name from a model is never taken as a ``module:Class`` or ``file.py:Class`` to load."""
    if name not in TOOL_REGISTRY.names():
        return None
    return TOOL_REGISTRY.get(name)


@register_tool
class FileEditor(Tool):
    """Edit the episode's private pass directory (the SWE-agent editor commands)."""

    name = "file_editor"
    description = (
        "View and edit files of your pass directory (pass_dir), and only there. Paths are "
        "relative to pass_dir ('MyPass.py', 'kernels.py', "
        "'sorted_output_pass_rule_names.json'). Commands: view (a file with line numbers, or "
        "'.' to list pass_dir), create (write a whole file; replaces an existing one), "
        "str_replace (replace the one occurrence of old_str by new_str), insert (new_str "
        "after line insert_line; 0 inserts at the top), undo_edit (revert the last edit of "
        "the file)."
    )
    parameters: ClassVar[dict[str, Any]] = {
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
    }

    def run(self, env: PassEnv, args: dict[str, Any]) -> tuple[str, Evaluation | None]:
        ws = env.workspace
        assert ws is not None
        path = args["path"]
        commands = {
            "view": lambda: ws.view(path, args.get("view_range")),
            "create": lambda: ws.create(path, args.get("file_text")),
            "str_replace": lambda: ws.str_replace(path, args.get("old_str"), args.get("new_str")),
            "insert": lambda: ws.insert(path, args.get("insert_line"), args.get("new_str")),
            "undo_edit": lambda: ws.undo_edit(path),
        }
        return commands[args["command"]](), None


@register_tool
class InspectGraph(Tool):
    """Show a task graph's operations and Inductor's kernels for it (in a disposable child)."""

    name = "inspect_graph"
    description = (
        "Show one of the task's graphs: its inputs, every operation with the shape and dtype "
        "it produces, and how TorchInductor compiles it (kernel count, which operations it "
        "fuses into one kernel)."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "graph": {"type": "string", "description": "a graph name from the task's list"},
            "max_nodes": {
                "type": "integer",
                "description": "show at most this many operations (default 200)",
            },
        },
        "required": ["graph"],
    }

    def run(self, env: PassEnv, args: dict[str, Any]) -> tuple[str, Evaluation | None]:
        entry, path = env.resolve_graph(args["graph"])
        max_nodes = max(1, min(int(args.get("max_nodes", 200)), 5000))
        text = inspect_graph(
            path,
            entry,
            device=env.config.device,
            max_nodes=max_nodes,
            timeout_s=env.config.inspect_timeout_s,
        )
        return text, None


@register_tool
class PassEvaluator(Tool):
    """Evaluate the pass directory with the real harness (quick timing)."""

    name = "pass_evaluator"
    description = (
        "Evaluate the passes of pass_dir on the task's graphs with the real harness (an "
        "isolated process, integrity checks, correctness over the tolerance sweep, timing). "
        "Answers in three stages: matching (which passes matched where; why a pattern did not"
        " match), correctness (per graph and dtype: status, max diff, first passing tolerance"
        " t), performance (speedups, ES_t, the aggregated score AS)."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "graphs": {
                "type": "array",
                "items": {"type": "string"},
                "description": "only these graphs (names from the task's list); default: all",
            }
        },
        "required": [],
    }

    def run(self, env: PassEnv, args: dict[str, Any]) -> tuple[str, Evaluation | None]:
        graphs = args.get("graphs")
        if graphs is not None:
            graphs = [env.resolve_graph(g)[0] for g in graphs]
        evaluation = env.evaluate(env.config.tool_settings, graphs, "quick")
        return render_evaluation(evaluation, env.dtypes, heading="pass_evaluator"), evaluation


@register_tool
class Submit(Tool):
    """Submit the pass directory: a fresh evaluation with full timing ends the episode."""

    name = "submit"
    description = (
        "Submit pass_dir as it is now and end the episode. The final reward is a fresh "
        "evaluation of the submitted passes with full timing."
    )
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}, "required": []}
    ends_episode = True

    def run(self, env: PassEnv, args: dict[str, Any]) -> tuple[str, Evaluation | None]:
        evaluation = env.evaluate(env.config.final_settings, None, "final")
        env.final = evaluation
        text = render_evaluation(evaluation, env.dtypes, heading="final evaluation (submitted)")
        return text, evaluation


TOOLS: tuple[dict[str, Any], ...] = tuple(
    TOOL_REGISTRY.get(name).schema() for name in TOOL_REGISTRY.names()
)
"""The schemas of the registered tools, in the OpenAI ``tools`` format (by name)."""
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
    tool = get_tool(call.name)
    if tool is None:
        names = ", ".join(TOOL_REGISTRY.names())
        return {}, f"unknown tool {call.name!r}; the tools are {names}"
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
    params = tool.parameters
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
