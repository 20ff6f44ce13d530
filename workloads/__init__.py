"""What simulated users send and how it is timed: SSE client, records, Locust user base."""

from ._client import CompletionRequest, LlmClient, TargetError
from ._records import RECORD_SCHEMA_VERSION, ErrorCategory, RecordWriter, RequestRecord, read_records
from ._sse import SseParser
from ._timing import StreamError, StreamTimer

__all__ = [
    "RECORD_SCHEMA_VERSION",
    "CompletionRequest",
    "ErrorCategory",
    "LlmClient",
    "RecordWriter",
    "RequestRecord",
    "SseParser",
    "StreamError",
    "StreamTimer",
    "TargetError",
    "read_records",
]
