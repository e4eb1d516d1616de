"""Longest common subsequence length.

Two implementations with identical results:

- ``rapidfuzz.distance.LCSseq`` (C++, bit-parallel over 64-bit words), used when rapidfuzz is installed
  (it is a pinned dependency). rapidfuzz compares strings character by character, so each pair's tokens
  are first mapped to code points (``_as_code_points``): one character per token the two sequences share,
  and one sentinel character per side for the tokens only that side has (those can never match, so they
  need no identity of their own). A pair therefore needs at most ``min(len(a), len(b)) + 2`` characters,
  far below the 1,114,112 code points Python strings can hold; a pair that would need more (impossible for
  a summary against a source, but cheap to guard) takes the pure-Python path.
- ``lcs_length_bits``: Hyyrö's formulation of the Allison-Dix algorithm in pure Python, one DP column as a
  bit vector held in a Python int, so each symbol of the shorter sequence costs a handful of big-int
  operations over ceil(m / 30) machine digits instead of m Python steps; O(n * m / w). The fallback when
  rapidfuzz is missing, and the reference the tests hold the rapidfuzz path to (with ``lcs_length_dp``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

__all__ = ["HAVE_RAPIDFUZZ", "lcs_length", "lcs_length_bits", "lcs_length_dp", "lcs_length_rapidfuzz"]

MAX_CODE_POINT = 0x10FFFF

_similarity: Callable[[str, str], int] | None
try:  # pragma: no branch - rapidfuzz is pinned; the fallback is for installs without it
    from rapidfuzz.distance.LCSseq import similarity as _similarity
except ImportError:  # pragma: no cover
    _similarity = None

HAVE_RAPIDFUZZ = _similarity is not None


def _as_code_points(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[str, str] | None:
    """Both sequences as strings with one character per token, equal tokens as equal characters.

    Code point 0 stands for every token of ``a`` that ``b`` lacks, 1 for every token of ``b`` that ``a``
    lacks (such tokens never match, so they need no identity of their own), and 2, 3, ... for the shared
    tokens. None when the shared vocabulary does not fit in Unicode. (Giving every distinct token its own
    code point with ``dict.fromkeys``/``map`` measured slower: the long side's distinct tokens all need an
    entry then.)
    """
    shared = set(a)
    shared.intersection_update(b)
    if len(shared) + 2 > MAX_CODE_POINT + 1:
        return None
    code = {token: chr(i) for i, token in enumerate(shared, start=2)}
    left = "".join([code.get(token, "\x00") for token in a])
    right = "".join([code.get(token, "\x01") for token in b])
    return left, right


def lcs_length_rapidfuzz(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """``lcs_length`` through rapidfuzz's LCSseq on code points; raises RuntimeError without rapidfuzz."""
    if _similarity is None:
        raise RuntimeError("rapidfuzz is not installed")
    if len(a) == 0 or len(b) == 0:
        return 0
    mapped = _as_code_points(a, b)
    if mapped is None:
        return lcs_length_bits(a, b)
    return int(_similarity(*mapped))


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (any hashable items)."""
    if _similarity is not None:
        return lcs_length_rapidfuzz(a, b)
    return lcs_length_bits(a, b)


def lcs_length_bits(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """The pure-Python bit-parallel LCS length (the fallback of ``lcs_length``).

    The longer sequence becomes the bit vector and the loop runs over the shorter
    one, which keeps the number of interpreted iterations as small as possible.
    """
    if len(a) < len(b):
        a, b = b, a
    m = len(a)
    if m == 0 or len(b) == 0:
        return 0
    wanted = set(b)
    positions: dict[Hashable, list[int]] = {}
    for i, item in enumerate(a):
        if item in wanted:
            positions.setdefault(item, []).append(i)
    if not positions:
        return 0
    # Match masks are assembled in a bytearray: setting a bit there is O(1), whereas
    # OR-ing 1 << i into a big int costs O(m / 30) per position.
    size = (m + 7) // 8
    match_masks: dict[Hashable, int] = {}
    for item, where in positions.items():
        buffer = bytearray(size)
        for i in where:
            buffer[i >> 3] |= 1 << (i & 7)
        match_masks[item] = int.from_bytes(buffer, "little")
    full = (1 << m) - 1
    v = full
    for item in b:
        if item not in match_masks:
            continue
        u = v & match_masks[item]
        v = ((v + u) | (v - u)) & full
    # Zero bits of the final column vector count the matched positions.
    return m - v.bit_count()


def lcs_length_dp(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Textbook O(len(a) * len(b)) dynamic programme with two rows; the reference for tests."""
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            current[j] = previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1])
        previous = current
    return previous[-1]
