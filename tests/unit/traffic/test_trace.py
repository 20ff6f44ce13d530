"""Trace replay's input: Mooncake JSONL rows read (bad ones named by line) and prompts built from them —
as long as recorded, by the emulator's own count, with equal hash ids giving equal prefix blocks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenstorm.emulator._payloads import estimate_prompt_tokens
from tokenstorm.workloads.traffic.tokens import TokenCounter
from tokenstorm.workloads.traffic.trace import _WORDS as WORDS
from tokenstorm.workloads.traffic.trace import TraceError, TracePrompts, TraceRow, parse_trace, read_trace

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "traces" / "mooncake_sample.jsonl"


def emulator_tokens(prompt: str) -> int:
    """What the emulator counts (and reports in usage) for a raw completion of ``prompt``."""
    return estimate_prompt_tokens({"prompt": prompt}, chat=False)


# -- parsing ---------------------------------------------------------------------------------
def test_rows_are_read_in_time_order_with_offsets_from_the_first() -> None:
    text = (
        '{"timestamp": 1500, "input_length": 700, "output_length": 9, "hash_ids": [0, 1]}\n'
        "\n"
        '{"timestamp": 1000, "input_length": 300, "output_length": 5, "hash_ids": [0], "session": "x"}\n'
        '{"timestamp": 1500.5, "input_length": 20, "output_length": 1}\n'
        '{"timestamp": 1500, "input_length": 40, "output_length": 2, "hash_ids": null}\n'
    )
    rows = parse_trace(text, "t.jsonl")
    assert [(r.line, r.offset_s) for r in rows] == [(3, 0.0), (1, 0.5), (5, 0.5), (4, 0.5005)]
    assert rows[0] == TraceRow(3, 0.0, 300, 5, (0,))
    assert rows[2].hash_ids == () and rows[3].hash_ids == ()


def test_the_sample_trace_is_mooncake_shaped() -> None:
    rows = read_trace(SAMPLE)
    assert len(rows) == 36 and rows[0].offset_s == 0.0
    assert all(len(r.hash_ids) == -(-r.input_length // 512) for r in rows)  # one id per 512-token block


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"input_length": 5, "output_length": 1}', "no 'timestamp'"),
        ('{"timestamp": 0, "output_length": 1}', "no 'input_length'"),
        ('{"timestamp": 0, "input_length": 5}', "no 'output_length'"),
        ('{"timestamp": -1, "input_length": 5, "output_length": 1}', "timestamp -1: expected milliseconds >= 0"),
        ('{"timestamp": "5", "input_length": 5, "output_length": 1}', "timestamp (a string): expected milliseconds"),
        ('{"timestamp": true, "input_length": 5, "output_length": 1}', "timestamp True: expected milliseconds"),
        ('{"timestamp": 0, "input_length": 0, "output_length": 1}', "input_length 0: expected a whole number >= 1"),
        ('{"timestamp": 0, "input_length": 5.5, "output_length": 1}', "input_length 5.5: expected a whole number"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 0}', "output_length 0: expected a whole number >= 1"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": 3}', "hash_ids: expected a list"),
        ('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["a"]}', "hash_ids: expected a list"),
    ],
)
def test_a_bad_row_is_named_by_file_and_line_in_one_line(line: str, reason: str) -> None:
    good = '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [0]}'
    with pytest.raises(TraceError) as exc:
        parse_trace(f"{good}\n\n{line}\n{good}\n", "--trace t.jsonl")
    message = str(exc.value)
    assert message.startswith(f"--trace t.jsonl:3: {reason}"), message
    assert "\n" not in message


def test_a_missing_empty_or_binary_trace_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"^--trace .*nope.jsonl: no such trace file$"):
        read_trace(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(TraceError, match=r"^--trace .*empty.jsonl: no requests — a Mooncake trace"):
        read_trace(empty)
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\x89PNG\r\n")
    with pytest.raises(TraceError, match=r"not UTF-8 text \(byte 0x89 at offset 0\)"):
        read_trace(binary)


# -- prompts ---------------------------------------------------------------------------------
def words(prompt: str) -> list[str]:
    return prompt.split(" ")[1:]  # every word has its leading space


def test_prompts_are_as_long_as_recorded_by_the_emulators_count_and_the_estimate() -> None:
    prompts = TracePrompts(TokenCounter(), 512)
    for row in read_trace(SAMPLE):
        req = prompts.request(row)
        assert req.prompt is not None and req.endpoint == "completions"
        assert emulator_tokens(req.prompt) == row.input_length == req.requested_prompt_tokens
        assert TokenCounter().count(req.prompt) == row.input_length
        assert len(words(req.prompt)) == row.input_length  # one word a token
        assert (req.max_tokens, req.ignore_eos, req.workload) == (row.output_length, True, "trace")


def test_equal_hash_ids_give_equal_prefix_blocks_and_different_ones_differ() -> None:
    block = 16
    prompts = TracePrompts(TokenCounter(), block, seed=3)
    a = words(prompts.prompt(TraceRow(1, 0.0, 3 * block, 1, (7, 8, 9))))
    b = words(prompts.prompt(TraceRow(2, 0.0, 2 * block + 5, 1, (7, 8, 10))))
    c = words(prompts.prompt(TraceRow(3, 0.0, block + 3, 1, (7, 8))))  # block 8 cut after 3 tokens
    d = words(prompts.prompt(TraceRow(4, 0.0, 2 * block, 1, (8, 7))))
    assert a[: 2 * block] == b[: 2 * block]  # blocks 7 and 8 shared
    assert a[2 * block :] != b[2 * block : 3 * block]  # block 9 is not block 10
    assert c == a[: block + 3]  # a partial last block is the start of the full one
    assert d[:block] == a[block : 2 * block] and d[block:] == a[:block]  # a block is its id's wherever it is
    assert a[:block] != a[block : 2 * block]


def test_tokens_past_the_hash_ids_are_unique_to_the_row_and_blocks_follow_the_seed() -> None:
    prompts = TracePrompts(TokenCounter(), 16)
    one, two = (prompts.prompt(TraceRow(n, 0.0, 40, 1, (5,))) for n in (1, 2))
    assert one[: 16 * 4] == two[: 16 * 4] and one[16 * 4 :] != two[16 * 4 :]
    assert prompts.prompt(TraceRow(1, 0.0, 40, 1, (5,))) == one  # the same row, the same prompt
    assert TracePrompts(TokenCounter(), 16, seed=1).prompt(TraceRow(1, 0.0, 40, 1, (5,)))[:64] != one[:64]
    # more hash ids than the prompt's length needs: the extra ones are not sent
    assert len(words(prompts.prompt(TraceRow(9, 0.0, 20, 1, (1, 2, 3, 4))))) == 20


def test_blocks_are_rebuilt_alike_once_evicted_from_the_cache() -> None:
    prompts = TracePrompts(TokenCounter(), 8)
    prompts.cache_blocks = 2
    first = prompts.block(0)
    for hash_id in range(1, 5):
        prompts.block(hash_id)
    assert prompts.block(0) == first


def test_with_a_tokenizer_prompts_are_sized_by_its_count(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    # A byte-level BPE (as GPT/Llama-3/Qwen): only the five words it was trained on are one token each.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([" " + " ".join(WORDS[:5])] * 50, trainer)
    (tmp_path / "tokenizer.json").write_text(tok.to_str())
    prompt = TracePrompts(TokenCounter(str(tmp_path)), 32).prompt(TraceRow(1, 0.0, 100, 1, (0, 1)))
    used = set(words(prompt))
    assert len(used) > 1 and all(len(tok.encode(" " + w).ids) == 1 for w in used)  # one-token words only
    assert "cut" not in used and "cut" in WORDS  # a word it splits
    assert len(tok.encode(prompt).ids) == 100


def test_a_tokenizer_that_splits_every_word_is_refused_in_one_line(tmp_path: Path) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Split

    tok = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = Split("", "isolated")  # every character a token
    (tmp_path / "tokenizer.json").write_text(tok.to_str())
    with pytest.raises(ValueError, match=r"^--tokenizer: no common English words are one token each"):
        TracePrompts(TokenCounter(str(tmp_path)), 512)


def test_a_block_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="--trace-block-size 0: must be >= 1"):
        TracePrompts(TokenCounter(), 0)
