"""Write a tiny random-weight Llama model and byte-level BPE tokenizer to a folder, offline.

Run with the vLLM venv's Python (it has transformers and tokenizers):
    .venv-vllm/bin/python tests/e2e/make_tiny_model.py OUT_DIR
The model is meaningless (random weights); it exists so a real vLLM server can schedule,
stream and count tokens exactly as it would for a real model.
"""

import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TEXT = [
    "The supplier shall deliver the goods within thirty days of the order date.",
    "违约责任：任何一方违反本合同约定的，应当承担违约责任。管辖法院为甲方所在地人民法院。",
    "def add(a, b):\n    return a + b\n\nclass Cache:\n    def get(self, key):\n        return None\n",
    "Time to first token and inter-token latency decide how fast a chat feels to its users.",
    "Either party may terminate this agreement with ninety days written notice.",
]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(TEXT * 20, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=4096,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(out)
    print(f"tiny model written to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
