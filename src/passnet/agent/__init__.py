"""PassAgent and the RL environment (docs/agent.md): agents write passes, the harness pays.

One module per concept::

    _workspace   the episode's private pass_dir copy and the file_editor commands
    _tools       the tools, each registered once (schema and handler); tool calls, arguments
    _evaluator   the reward: a real evaluation of a pass_dir on a task (AS, or MIN_REWARD)
    _errors      AgentError
    _diagnostics pass_evaluator's three-stage answer (matching, correctness, performance)
    _inspect     inspect_graph: operations, shapes, dtypes, Inductor's kernels
    _prompt      the system prompt and the task prompt
    _env         PassEnv: reset(task) -> observation; step(tool_call) -> obs, reward, ...
    _policy      policies: a chat model through the openai client
    _library_policy  the baseline without a model: reference passes that fit the task
    _loop        episodes, tasks side by side, resume, best snapshots
    _bench       a policy as a benchmark row: a split's episodes, their submissions' records
    _trajectory  trajectories.jsonl and SFT exports (openai, sharegpt)
    _serve       passnet serve: the evaluation as an authenticated HTTP reward endpoint
    _verifiers   the adapter for the ``verifiers`` RL framework (load_environment)

The reward never comes from anything the agent wrote: it is computed from the records
of the isolated evaluation child. See ``docs/agent.md``.
"""

from passnet.agent._bench import AgentSplitSummary, episode_pass_dir, run_agent_split
from passnet.agent._diagnostics import render_evaluation
from passnet.agent._env import STOP_REASONS, EnvConfig, Observation, PassEnv
from passnet.agent._errors import AgentError
from passnet.agent._evaluator import (
    MIN_REWARD,
    OUTCOMES,
    Evaluation,
    evaluate_pass_dir,
    local_executor,
    pass_dir_config,
    quick_settings,
    reward_of,
)
from passnet.agent._inspect import inspect_graph
from passnet.agent._library_policy import (
    LibraryPolicy,
    candidate_passes,
    needed_rules,
    pattern_ops,
)
from passnet.agent._loop import AgentRunSummary, episode_name, run_agent, run_episode
from passnet.agent._policy import (
    OpenAIPolicy,
    Policy,
    PolicyReply,
    assistant_message,
    check_endpoint_options,
    require_openai,
)
from passnet.agent._prompt import SYSTEM_PROMPT, task_dtypes, task_messages
from passnet.agent._serve import RewardServer, ServeConfig
from passnet.agent._tools import (
    TOOL_NAMES,
    TOOL_REGISTRY,
    TOOLS,
    Tool,
    ToolCall,
    get_tool,
    parse_call,
    register_tool,
)
from passnet.agent._trajectory import (
    DEFAULT_MIN_REWARD,
    TRAJECTORIES_FILE,
    Trajectory,
    append_trajectory,
    export_trajectories,
    read_trajectories,
)
from passnet.agent._verifiers import load_environment
from passnet.agent._workspace import ToolError, Workspace

__all__ = [
    "DEFAULT_MIN_REWARD",
    "MIN_REWARD",
    "OUTCOMES",
    "STOP_REASONS",
    "SYSTEM_PROMPT",
    "TOOLS",
    "TOOL_NAMES",
    "TOOL_REGISTRY",
    "TRAJECTORIES_FILE",
    "AgentError",
    "AgentRunSummary",
    "AgentSplitSummary",
    "EnvConfig",
    "Evaluation",
    "LibraryPolicy",
    "Observation",
    "OpenAIPolicy",
    "PassEnv",
    "Policy",
    "PolicyReply",
    "RewardServer",
    "ServeConfig",
    "Tool",
    "ToolCall",
    "ToolError",
    "Trajectory",
    "Workspace",
    "append_trajectory",
    "assistant_message",
    "candidate_passes",
    "check_endpoint_options",
    "episode_name",
    "episode_pass_dir",
    "evaluate_pass_dir",
    "export_trajectories",
    "get_tool",
    "inspect_graph",
    "load_environment",
    "local_executor",
    "pass_dir_config",
    "needed_rules",
    "parse_call",
    "pattern_ops",
    "quick_settings",
    "read_trajectories",
    "register_tool",
    "render_evaluation",
    "require_openai",
    "reward_of",
    "run_agent",
    "run_agent_split",
    "run_episode",
    "task_dtypes",
    "task_messages",
]
