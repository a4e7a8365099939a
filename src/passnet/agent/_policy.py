"""Policies: what chooses the next action. A chat model behind any OpenAI-compatible
endpoint (:class:`OpenAIPolicy`), or a program (:class:`~passnet.agent.LibraryPolicy`).

A policy answers the conversation so far with one assistant message in the OpenAI chat
format (text and/or ``tool_calls``). A reply that failed (the endpoint kept erroring) is a
:class:`PolicyReply` with ``error`` set and no message; the loop decides what that costs.
"""

from __future__ import annotations

import abc
import logging
import os
from dataclasses import dataclass
from typing import Any

from passnet.agent._errors import AgentError
from passnet.errors import MissingDependency
from passnet.task import Task

__all__ = [
    "OpenAIPolicy",
    "Policy",
    "PolicyReply",
    "assistant_message",
    "check_endpoint_options",
    "require_openai",
]

log = logging.getLogger(__name__)

OPENAI_HINT = "pip install 'passnet[agent]'  (or: pip install 'openai>=1.40')"


def require_openai() -> Any:
    """The ``openai`` module, or a :class:`MissingDependency` saying how to install it."""
    try:
        import openai
    except ImportError as exc:
        raise MissingDependency(
            f"the agent talks to models through the openai client, which is not installed: "
            f"{OPENAI_HINT}",
            package="openai",
        ) from exc
    return openai


@dataclass(frozen=True)
class PolicyReply:
    """One reply: an assistant message, or the reason there is none."""

    message: dict[str, Any] | None
    tokens: int = 0
    """Prompt and completion tokens the reply cost (0 where unknown)."""
    error: str | None = None


class Policy(abc.ABC):
    """Chooses the next assistant message of an episode."""

    name: str = "policy"
    """What trajectories record as the ``model``."""

    @abc.abstractmethod
    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyReply:
        """The reply to ``messages`` (the whole conversation) with ``tools`` available."""

    def observe(self, info: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Hear the environment's ``info`` of each step (a program may use it; a model reads
        the messages)."""

    def start(self, task: Task) -> None:  # noqa: B027 - optional hook
        """A new episode on ``task`` begins (a stateful policy resets itself)."""


class OpenAIPolicy(Policy):
    """A chat model through the official ``openai`` client: hosted APIs, vLLM, SGLang, Ollama.

    ``api_key`` None reads ``api_key_env`` (an endpoint without authentication, such as a
    local vLLM, gets a placeholder key). Transport errors are retried by the client
    (``max_retries``); one that persists comes back as a failed :class:`PolicyReply`.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float | None = None,
        max_reply_tokens: int | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 2,
    ) -> None:
        openai = require_openai()
        self.name = model
        self.temperature = temperature
        self.max_reply_tokens = max_reply_tokens
        key = api_key if api_key is not None else os.environ.get(api_key_env) or "EMPTY"
        self._openai = openai
        self.client = openai.OpenAI(
            base_url=base_url, api_key=key, timeout=timeout_s, max_retries=max_retries
        )

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> PolicyReply:
        kwargs: dict[str, Any] = {"model": self.name, "messages": messages, "tools": tools}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_reply_tokens is not None:
            kwargs["max_tokens"] = self.max_reply_tokens
        try:
            response = self.client.chat.completions.create(**kwargs)
        except self._openai.APIError as exc:
            return PolicyReply(None, 0, f"{type(exc).__name__}: {exc}")
        usage = getattr(response, "usage", None)
        tokens = int(getattr(usage, "total_tokens", 0) or 0) if usage is not None else 0
        choices = getattr(response, "choices", None) or []
        if not choices or getattr(choices[0], "message", None) is None:
            return PolicyReply({"role": "assistant", "content": ""}, tokens)
        return PolicyReply(assistant_message(choices[0].message), tokens)


def assistant_message(message: Any) -> dict[str, Any]:
    """An assistant message as a plain OpenAI-format dict: role, content, tool_calls (only
    what the protocol needs, so it can be sent back and stored)."""
    out: dict[str, Any] = {"role": "assistant", "content": getattr(message, "content", None) or ""}
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        from passnet.agent._tools import ToolCall

        out["tool_calls"] = [ToolCall.from_message(c).to_message() for c in calls]
    return out


def check_endpoint_options(model: str | None, base_url: str | None) -> None:
    """Refuse an agent run without a model or an endpoint (before anything starts)."""
    if not model:
        raise AgentError("--model is required with --policy model", option="model")
    if not base_url:
        raise AgentError(
            "--base-url is required with --policy model (e.g. http://localhost:8000/v1 for "
            "vLLM, https://api.openai.com/v1)",
            option="base_url",
        )
