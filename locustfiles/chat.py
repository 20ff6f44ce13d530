"""Chat traffic: multi-turn conversations streamed from /v1/chat/completions.

locust -f locustfiles/chat.py                      # web UI, built-in emulator (SIMULATED)
locust -f locustfiles/chat.py --headless -u 20 -r 20 -t 20s --host http://gpu:8000
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from locust import between, task

from workloads import CompletionRequest
from workloads.locust_plugin import LlmUser, install

install()

_OPENERS = (
    "Summarise the main obligations of a software licence agreement in three bullet points.",
    "Explain what KV-cache pressure means for an LLM server, briefly.",
    "Write a short, polite reply declining a meeting invitation.",
    "What are the trade-offs between FP8 and AWQ quantisation for serving?",
    "Give me three ideas for naming a load-testing tool.",
)


class ChatUser(LlmUser):
    """A user chatting: a few turns per conversation, history sent with each turn."""

    workload = "chat"
    default_max_tokens = 128
    wait_time = between(0.5, 2.0)

    @task
    def conversation(self) -> None:
        messages = [{"role": "system", "content": "You are a concise, helpful assistant."}]
        for turn in range(3):
            opener = _OPENERS[(id(self) + turn) % len(_OPENERS)]
            messages.append({"role": "user", "content": opener})
            record = self.send(CompletionRequest(workload=self.workload, endpoint="chat", messages=list(messages)))
            if not record.ok:
                return
            messages.append({"role": "assistant", "content": f"(answer of {record.output_tokens} tokens)"})
