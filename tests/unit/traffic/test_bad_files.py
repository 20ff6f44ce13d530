"""Files a user names that are not what they should be — binary, a directory, unreadable, not a
tokenizer — each refused with one line naming the file (a ``ValueError``: what the plugin turns into
``tokenstorm: ...`` and exit 3), and a leading UTF-8 BOM accepted (issue #20, items 5 and 11)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fakes.files import BOM, PNG, RANDOM, first_bad_byte
from tokenstorm.workloads.traffic import WorkloadFileError, settings_from_options
from tokenstorm.workloads.traffic.datasets import DatasetError, load_dataset
from tokenstorm.workloads.traffic.settings import apply_workload_file, default_settings
from tokenstorm.workloads.traffic.tokens import TokenCounter

TOKENIZER_HINT = "give the model's tokenizer.json (Hugging Face format) or its directory"


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def tiny_tokenizer_json() -> str:
    """A real (word-level) Hugging Face tokenizer, as the text of its tokenizer.json."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    return str(tok.to_str())


# -- datasets ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "offset"),
    [(PNG, 0), (RANDOM, first_bad_byte(RANDOM)), (BOM + b'{"prompt": "hi"}\n\xff', 20)],
    ids=["png", "random", "bom-then-bad"],
)
def test_a_binary_dataset_names_the_file_and_its_first_bad_byte(tmp_path: Path, data: bytes, offset: int) -> None:
    path = write(tmp_path, "d.jsonl", data)
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    assert str(exc.value) == (
        f"{path}: not UTF-8 text (byte 0x{data[offset]:02x} at offset {offset}) — a dataset is ShareGPT JSON or JSONL"
    )


def test_a_utf16_dataset_is_not_taken_for_json(tmp_path: Path) -> None:
    path = write(tmp_path, "d.jsonl", '{"prompt": "hi"}\n'.encode("utf-16-le"))  # valid UTF-8, every other byte NUL
    with pytest.raises(DatasetError, match=r"d\.jsonl: not UTF-8 text \(byte 0x00 at offset 1\)"):
        load_dataset(path)


def test_a_dataset_saved_with_a_bom_is_read(tmp_path: Path) -> None:
    jsonl = write(tmp_path, "d.jsonl", BOM + '{"prompt": "première"}\n{"prompt": "second"}\n'.encode())
    sharegpt = write(tmp_path, "d.json", BOM + b'[{"conversations": [{"from": "human", "value": "hi"}]}]')
    assert [c.turns for c in load_dataset(jsonl)] == [("première",), ("second",)]
    assert load_dataset(sharegpt)[0].turns == ("hi",)


def test_a_bom_dataset_named_in_a_workload_file_is_read(tmp_path: Path) -> None:
    write(tmp_path, "d.jsonl", BOM + b'{"prompt": "from the file"}\n')
    mix = write(tmp_path, "mix.yaml", BOM + b"workloads:\n  chat: {weight: 5, dataset: d.jsonl}\n")
    chat = apply_workload_file(mix, default_settings())["chat"]
    assert chat.weight == 5 and chat.dataset is not None
    assert load_dataset(Path(chat.dataset))[0].turns == ("from the file",)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('{\n  "conversations": [\n    {"from": "human" "value": "hi"}\n  ]\n}\n', 3),  # one object, indented
        ('[\n  {"conversations": []},\n  {"conversations": [}\n]\n', 3),  # a list
        ('{"prompt": "one"}\n{"prompt": "two"}\n\n{"prompt": "three",}\n', 4),  # JSONL: the bad line, blank counted
    ],
    ids=["object", "list", "jsonl"],
)
def test_malformed_json_in_a_dataset_names_its_line(tmp_path: Path, text: str, line: int) -> None:
    path = write(tmp_path, "d.json", text.encode())
    with pytest.raises(DatasetError) as exc:
        load_dataset(path)
    assert str(exc.value).startswith(f"{path}:{line}: not valid JSON ("), exc.value
    assert "\n" not in str(exc.value) and "prompt" not in str(exc.value)  # the file's text is not repeated


# -- workload files ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("workloads:\n  chat: {weight: 1\n", ":3: not valid YAML"),
        ("workloads:\n  chat: {weight: *nowhere}\n", ":2: not valid YAML"),  # an alias never defined
        ("workloads:\n  ? [chat, code]\n  : {weight: 1}\n", ":2: unknown workload (known: "),  # a list as a name
        ("workloads:\n  chat: {weight: 1, [a]: 2}\n", ":2: chat: a setting's name is a word"),
        ("workloads:\n  chat:\n    turns: !!python/name:os.system\n", ":3: chat.turns: not a plain value"),
        ("workloads:\n  chat:\n    checks: [!!python/object:x {}]\n", ":3: chat.checks: not a plain value"),
        (f"workloads:\n  {'k' * 200}: {{weight: 1}}\n", ":2: unknown workload (known: "),  # a long key not repeated
    ],
    ids=["unclosed", "alias", "list-key", "list-setting", "tag", "tag-in-checks", "long-key"],
)
def test_a_malformed_workload_file_is_one_line_with_its_line(tmp_path: Path, text: str, says: str) -> None:
    path = write(tmp_path, "mix.yaml", text.encode())
    with pytest.raises(WorkloadFileError) as exc:
        settings_from_options(SimpleNamespace(workload_file=str(path)))
    assert str(exc.value).startswith(f"{path}{says}"), exc.value
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(("data", "offset"), [(PNG, 0), (RANDOM, first_bad_byte(RANDOM))], ids=["png", "random"])
def test_a_binary_workload_file_names_the_file(tmp_path: Path, data: bytes, offset: int) -> None:
    path = write(tmp_path, "mix.yaml", data)
    with pytest.raises(WorkloadFileError) as exc:
        settings_from_options(SimpleNamespace(workload_file=str(path)))
    assert (
        str(exc.value)
        == f"{path}: not UTF-8 text (byte 0x{data[offset]:02x} at offset {offset}) — a workload file is YAML"
    )


def test_a_control_character_in_a_workload_file_gives_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "mix.yaml", b"workloads:\n  chat:\n    weight: \x01\n")
    with pytest.raises(WorkloadFileError) as exc:
        apply_workload_file(path, default_settings())
    assert str(exc.value) == f"{path}:3: not text (control character 0x01) — a workload file is YAML"


def test_a_directory_as_workload_file(tmp_path: Path) -> None:
    with pytest.raises(WorkloadFileError) as exc:
        apply_workload_file(tmp_path, default_settings())
    assert str(exc.value) == f"{tmp_path}: is a directory, not a workload file"


def test_a_workload_file_saved_with_a_bom_is_read(tmp_path: Path) -> None:
    path = write(tmp_path, "mix.yaml", BOM + b"workloads:\n  code: {weight: 7}\n")
    assert apply_workload_file(path, default_settings())["code"].weight == 7


# -- --tokenizer ---------------------------------------------------------------------------
@pytest.mark.parametrize(("data", "offset"), [(PNG, 0), (RANDOM, first_bad_byte(RANDOM))], ids=["png", "random"])
def test_a_binary_tokenizer_names_the_option_and_the_file(tmp_path: Path, data: bytes, offset: int) -> None:
    path = write(tmp_path, "tokenizer.json", data)
    with pytest.raises(ValueError) as exc:
        TokenCounter(str(path))
    assert (
        str(exc.value)
        == f"--tokenizer {path}: not UTF-8 text (byte 0x{data[offset]:02x} at offset {offset}) — {TOKENIZER_HINT}"
    )


@pytest.mark.parametrize(
    "text", ['{"a": 1}', "[]", '{"version": "1.0"}', ""], ids=["object", "list", "no-model", "empty"]
)
def test_a_json_file_that_is_no_tokenizer(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "config.json", text.encode())
    with pytest.raises(ValueError) as exc:
        TokenCounter(str(path))
    message = str(exc.value)
    assert message.startswith(f"--tokenizer {path}: not a tokenizer (") and message.endswith(f") — {TOKENIZER_HINT}")
    assert "\n" not in message


def test_malformed_json_in_a_tokenizer_names_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, "tokenizer.json", b'{\n  "version": "1.0",\n  "model": {"type": "BPE" "vocab": {}}\n}\n')
    with pytest.raises(ValueError) as exc:
        TokenCounter(str(path))
    assert str(exc.value) == f"--tokenizer {path}:3: not valid JSON (Expecting ',' delimiter) — {TOKENIZER_HINT}"


def test_a_directory_without_tokenizer_json(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.model").write_bytes(b"\x0a\x05sentencepiece")
    with pytest.raises(ValueError) as exc:
        TokenCounter(str(tmp_path))
    assert str(exc.value) == f"--tokenizer {tmp_path}: a directory without tokenizer.json — {TOKENIZER_HINT}"


def test_a_missing_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as exc:
        TokenCounter(str(tmp_path / "nope.json"))
    assert str(exc.value) == f"--tokenizer {tmp_path / 'nope.json'}: no such tokenizer file"


def test_a_tokenizer_json_saved_with_a_bom_counts_exactly(tmp_path: Path) -> None:
    write(tmp_path, "tokenizer.json", BOM + tiny_tokenizer_json().encode())
    for given in (tmp_path, tmp_path / "tokenizer.json"):
        counter = TokenCounter(str(given))
        assert counter.exact and counter.count("hello world hello") == 3


# -- every loader: one line, a ValueError --------------------------------------------------
LOADERS: dict[str, Any] = {
    "dataset": load_dataset,
    "workload file": lambda path: apply_workload_file(path, default_settings()),
    "tokenizer": lambda path: TokenCounter(str(path)),
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_an_unreadable_file_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: str) -> None:
    path = write(tmp_path, "secret.txt", b"{}")
    real_open = Path.open

    def open_denied(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == path:  # as for a file of another user's, mode 0600 (the tests may run as root)
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_denied)
    with pytest.raises(ValueError) as exc:
        LOADERS[loader](path)
    assert str(exc.value).endswith(f"{path}: cannot read (Permission denied)")
