"""Tool schemas and call parsing: a malformed call is a message, never an exception."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from passnet.agent import (
    TOOL_NAMES,
    TOOL_REGISTRY,
    TOOLS,
    Tool,
    ToolCall,
    get_tool,
    parse_call,
    register_tool,
)
from passnet.errors import RegistryError


def test_the_four_tools_are_openai_function_schemas():
    assert TOOL_NAMES == ("file_editor", "inspect_graph", "pass_evaluator", "submit")
    for tool in TOOLS:
        assert tool["type"] == "function"
        params = tool["function"]["parameters"]
        assert params["type"] == "object" and set(params["required"]) <= set(params["properties"])
    json.dumps(TOOLS)  # plain JSON


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (ToolCall("1", "shell", "{}"), "unknown tool 'shell'"),
        (ToolCall("1", "file_editor", '{"command": "view", "path": '), "not valid JSON"),
        (ToolCall("1", "file_editor", "[1, 2]"), "must be a JSON object"),
        (ToolCall("1", "file_editor", '{"path": "a.py"}'), "needs the argument 'command'"),
        (ToolCall("1", "file_editor", '{"command": "rm", "path": "a"}'), "must be one of"),
        (ToolCall("1", "file_editor", '{"command": "view", "path": 3}'), "of type string"),
        (
            ToolCall("1", "file_editor", '{"command": "view", "path": "a", "x": 1}'),
            "no argument 'x'",
        ),
        (ToolCall("1", "pass_evaluator", '{"graphs": [1]}'), "list of string"),
        (ToolCall("1", "inspect_graph", '{"graph": "g", "max_nodes": true}'), "of type integer"),
    ],
)
def test_malformed_calls_come_back_as_problems(call, problem):
    args, found = parse_call(call)
    assert args == {} and found is not None and problem in found


def test_a_well_formed_call_parses_and_round_trips_through_the_message_format():
    call = ToolCall("c7", "file_editor", json.dumps({"command": "view", "path": "."}))
    assert parse_call(call) == ({"command": "view", "path": "."}, None)
    assert ToolCall.from_message(call.to_message()) == call
    assert parse_call(ToolCall("c8", "submit", "")) == ({}, None)
    flat = {"id": "c9", "name": "inspect_graph", "arguments": {"graph": "g"}}  # verifiers' form
    assert ToolCall.from_message(flat) == ToolCall("c9", "inspect_graph", '{"graph": "g"}')


def test_each_tool_is_registered_once_with_its_schema_and_its_handler():
    assert TOOL_REGISTRY.names() == list(TOOL_NAMES)
    for name, schema in zip(TOOL_NAMES, TOOLS):
        tool = get_tool(name)
        assert tool is not None and tool.schema() == schema and tool.run is not Tool.run
    assert [n for n in TOOL_NAMES if get_tool(n).ends_episode] == ["submit"]


def test_a_tool_without_a_handler_or_with_a_broken_schema_cannot_be_registered():
    class NoHandler(Tool):
        name = "no_handler"
        description = "nothing"
        parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}, "required": []}

    with pytest.raises(RegistryError, match="'no_handler' has no handler"):
        register_tool(NoHandler)

    class BadSchema(Tool):
        name = "bad_schema"
        description = "x"
        parameters: ClassVar[dict[str, Any]] = {
            "type": "object",
            "properties": {},
            "required": ["x"],
        }

        def run(self, env, args):
            return "", None

    with pytest.raises(RegistryError, match="'bad_schema': parameters"):
        register_tool(BadSchema)
    assert "no_handler" not in TOOL_REGISTRY.names() and "bad_schema" not in TOOL_REGISTRY.names()


def test_a_tool_name_naming_a_file_or_module_is_unknown_and_never_loaded(tmp_path):
    marker = tmp_path / "imported.txt"
    plugin = tmp_path / "evil.py"
    plugin.write_text(f"open({str(marker)!r}, 'w').write('ran')\nclass X: pass\n")
    for name in (f"{plugin}:X", "os:system", "passnet.agent._tools:Submit"):
        assert get_tool(name) is None
        args, problem = parse_call(ToolCall("1", name, "{}"))
        assert args == {} and problem is not None and f"unknown tool {name!r}" in problem
    assert not marker.exists()
