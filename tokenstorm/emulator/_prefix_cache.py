"""The emulator's prefix cache: which leading blocks of a prompt it already holds, as vLLM's does.

vLLM hashes each *full* block of ``block_size`` prompt tokens together with the hash of the block
before it, so a block is found only when everything before it matched too; a request's cache hit is
the run of leading blocks found, and the last prompt token is always computed (its logits start the
answer), so at most ``(n - 1) // block_size`` blocks of an ``n``-token prompt are hits. The emulator
has no tokenizer: a token is 4 bytes of the prompt's text (the size ``estimate_prompt_tokens`` gives),
so block ``b`` is bytes ``[4·b·block_size, 4·(b+1)·block_size)``. Blocks are kept least recently used
first and evicted when more than ``capacity_blocks`` are held. Generated output is not cached as it
is generated (vLLM caches it, but the next turn's prompt holds the answer as its chat template renders
it, rarely the same tokens): it is cached once a prompt carries it.
"""

from __future__ import annotations

from collections import OrderedDict

from ._payloads import BYTES_PER_TOKEN

__all__ = ["PrefixCache"]


class PrefixCache:
    """An LRU of chained block hashes; :meth:`admit` answers how many prompt tokens were cached.

    Only the server's event loop calls it (one thread), so it needs no lock."""

    def __init__(self, capacity_blocks: int, block_size: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.block_size = block_size
        self._blocks: OrderedDict[int, None] = OrderedDict()

    @property
    def enabled(self) -> bool:
        """Whether it caches anything (``capacity_blocks`` > 0)."""
        return self.capacity_blocks > 0

    def created(self, prompt_tokens: int, cached_tokens: int) -> int:
        """The prompt tokens a request computed and wrote to the cache (vLLM's ``num_cache_creation_tokens``): its
        full blocks, all kept once it is prefilled, less the ``cached_tokens`` it found there."""
        return max(0, prompt_tokens // self.block_size * self.block_size - cached_tokens) if self.enabled else 0

    def __len__(self) -> int:
        return len(self._blocks)

    def admit(self, text: bytes, prompt_tokens: int) -> int:
        """Look the prompt up and keep its full blocks; return its cached tokens (a multiple of the block size).

        ``text`` is the prompt as bytes and ``prompt_tokens`` its size in tokens. The blocks found become
        the most recently used; the ones not found are added after them, evicting the least recently used.
        """
        if not self.enabled or prompt_tokens < 1:
            return 0
        step = BYTES_PER_TOKEN * self.block_size
        blocks = self._blocks
        parent = 0
        hits = 0
        matching = True
        chain = []
        for b in range(prompt_tokens // self.block_size):
            # Python's own hash of (parent, block): 64 bits, salted per process (the cache lives in one),
            # twice as fast as a cryptographic one — a 128k-token prompt is hashed in a few milliseconds.
            parent = hash((parent, text[b * step : (b + 1) * step]))
            if parent in blocks:  # after a block not found, none is (each hash holds the ones before it)
                hits += 1 if matching else 0
            else:
                matching = False
                blocks[parent] = None
            chain.append(parent)
        # As vLLM frees a request's blocks: last block first, so a prompt's tail is evicted before its prefix
        # (the prefix, shared by more requests, stays longest).
        for h in reversed(chain):
            blocks.move_to_end(h)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        return min(hits, (prompt_tokens - 1) // self.block_size) * self.block_size
