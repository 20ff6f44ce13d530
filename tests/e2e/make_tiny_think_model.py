"""Turn the tiny model into a "thinking" one, offline: the fixtures' reasoning streams came from it.

Run with the vLLM venv's Python, on a folder written by make_tiny_model.py:
    .venv-vllm/bin/python tests/e2e/make_tiny_think_model.py /work/vllm/tiny /work/vllm/tiny-think
It adds ``<think>`` and ``</think>`` as plain added tokens (as Qwen3 and DeepSeek-R1 have them, so they stay in the
text the reasoning parser reads), makes the chat template open ``<think>`` after the assistant header, and unties
the output layer to scale the ``</think>`` row 12 times: the random model then closes its reasoning after a
handful of tokens in some answers instead of about one answer in ten at 64 tokens. Serve it with
``--reasoning-parser deepseek_r1``.
"""

import sys
from pathlib import Path

import torch
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

END_ROW_SCALE = 12.0  # x8: </think> in ~1 of 3 answers within 64 tokens; x40: at once, every time (fp32 sampling)


def main(src: Path, out: Path) -> None:
    tok = PreTrainedTokenizerFast.from_pretrained(src)
    tok.add_tokens(["<think>", "</think>"])
    template = (src / "chat_template.jinja").read_text()
    header = "<|im_start|>assistant\n"
    tok.chat_template = template.replace(header + "{% endif %}", header + "<think>\n{% endif %}")
    tok.save_pretrained(out)
    model = LlamaForCausalLM.from_pretrained(src, dtype=torch.float32)
    torch.manual_seed(0)  # the two new rows are random
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    model.config.tie_word_embeddings = False
    model.lm_head.weight = torch.nn.Parameter(model.model.embed_tokens.weight.detach().clone())
    with torch.no_grad():
        model.lm_head.weight[tok.convert_tokens_to_ids("</think>")] *= END_ROW_SCALE
    model.save_pretrained(out)
    print(f"thinking tiny model written to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
