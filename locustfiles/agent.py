"""Agent traffic: tool-calling sessions of coding and legal assistants, several steps each.

A system prompt and tool schemas shared by every session of a profile, a task, then steps: the streamed
tool call, a synthetic tool result with the call's id, the next request with the whole history.

locust -f locustfiles/agent.py                 # web UI; no --host: built-in emulator (SIMULATED)
locust -f locustfiles/agent.py --headless -u 16 -r 4 -t 10m --host http://gpu:8000 \
    --agent-tool-choice required --agent-steps uniform:4-12 --slo slo.yaml

The server must call tools: vLLM with --enable-auto-tool-choice --tool-call-parser NAME (hermes for Qwen)
for tool_choice auto/required, and --enable-prompt-tokens-details for cached_tokens on every record.
"""

from tokenstorm.workloads.plugin import install
from tokenstorm.workloads.plugin.users.workload import AgentUser

install()

__all__ = ["AgentUser"]
