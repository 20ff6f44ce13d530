"""Why a run's requests were refused, in the words its verdict adds: one HTTP status refusing them all (a wrong
key, path or model), or a server that does not call tools refusing agent traffic."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["why_none_succeeded", "why_tools_refused"]


#: what a refusal of every request most likely means, by HTTP status
_REFUSALS = {
    401: "HTTP 401 (unauthorized): check --api-key / $OPENAI_API_KEY against the server's --api-key",
    403: "HTTP 403 (forbidden): the key or credentials were taken but not allowed this model or endpoint",
    404: "HTTP 404 (not found): check the URL's path (the OpenAI API is under /v1) and --model",
}


def why_none_succeeded(df: pd.DataFrame) -> str:
    """``": every request was refused with HTTP 401 ... check --api-key"`` when one status refused them all."""
    if "status_code" not in df or not len(df):
        return ""
    codes = df["status_code"].dropna()
    top = codes.mode()
    if top.empty or (codes == top.iloc[0]).sum() < 0.9 * len(df):
        return ""
    status = int(top.iloc[0])
    share = "every request was" if (codes == status).sum() == len(df) else "nearly every request was"
    return f": {share} refused with {_REFUSALS[status]}" if status in _REFUSALS else ""


#: what vLLM answers (HTTP 400) to tools it was not started to call
_NO_TOOL_CALLING = ("--enable-auto-tool-choice", "--tool-call-parser", "tool_choice")


def why_tools_refused(df: pd.DataFrame) -> str:
    """``" — N requests offering tools were refused ..."`` when the server refused tool calling (a vLLM
    started without ``--enable-auto-tool-choice --tool-call-parser``): agent traffic cannot run there."""
    if "error_detail" not in df or "status_code" not in df:
        return ""
    detail = df["error_detail"].astype("category")  # each distinct text searched once, not each row's
    said = pd.Series(detail.cat.categories.astype(str)).str.contains("|".join(_NO_TOOL_CALLING)).to_numpy(dtype=bool)
    refused = (df["status_code"] == 400).to_numpy() & np.append(said, False)[np.asarray(detail.cat.codes)]
    n = int(refused.sum())
    if not n:
        return ""
    names = ", ".join(sorted({str(w) for w in df.loc[refused, "workload"]}))
    return (
        f" — {n} {names} requests were refused because the server does not call tools (HTTP 400): start "
        "vLLM with --enable-auto-tool-choice --tool-call-parser NAME, or leave them out (--weights agent=0)"
    )
