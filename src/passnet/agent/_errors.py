"""The agent's error: an option, an endpoint or a device it cannot work with."""

from __future__ import annotations

from passnet.errors import PassnetError

__all__ = ["AgentError"]


class AgentError(PassnetError):
    """The agent cannot run as asked: a bad option, an unusable endpoint or device, an ended
    episode.

    Context: ``task``, ``option``, ``device``.
    """
