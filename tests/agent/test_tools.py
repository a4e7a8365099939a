"""Tool schemas and call parsing: a malformed call is a message, never an exception."""

from __future__ import annotations

import json

import pytest

from passnet.agent import TOOL_NAMES, TOOLS, ToolCall, parse_call


def test_the_four_tools_are_openai_function_schemas():
    assert TOOL_NAMES == ("file_editor", "pass_evaluator", "inspect_graph", "submit")
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
