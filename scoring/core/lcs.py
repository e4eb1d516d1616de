"""Longest common subsequence length.

Three implementations with the same results; ``lcs_length`` picks the fastest for the pair's size:

- rapidfuzz's ``LCSseq`` (C++, bit-parallel over 64-bit words) on the token lists themselves
  (``lcs_length_lists``): rapidfuzz keys each item by its hash (a one-character str by its code point), with
  no Python work per token. ``lcs_length`` takes it for small pairs of str tokens: at most
  ``LIST_PATH_MAX_CELLS`` cells (shorter x longer side) and a longer side of at most ``LIST_PATH_MAX_LONGER``
  tokens, where bench/lcs.py measures it 1.1-3x faster than the codes (64 x 664 tokens, a CNN/DailyMail
  summary against its article: 1.6-1.8x). Beyond that rapidfuzz's hash-keyed tables over the longer side cost
  more than coding the tokens (300 x 5,000: the lists 1.1-1.2x slower; 20,000-token sources: 2-2.5x).
  Keying by hash is exact unless two distinct tokens of one pair share a 64-bit key. A str's hash is
  SipHash under a key drawn at random per process, so that chance is about 1 in 10^12 for a pair with 5,000
  distinct tokens; other items collide by construction (``hash(0) == hash(2**61 - 1)``), so only lists of
  str take this path.
- rapidfuzz's ``LCSseq`` on codes (``lcs_length_rapidfuzz``): each pair's tokens are first given codes
  (``_as_codes``): the shorter sequence's distinct tokens are numbered from 1, and the tokens of the longer
  sequence that the shorter one lacks are dropped (they can never match, so the LCS is unchanged). Up to 255
  distinct tokens (a summary's usual vocabulary) the codes are bytes, which rapidfuzz reads through flat
  tables and Python builds fastest; beyond that, characters; a shorter side with more distinct tokens than
  Unicode has code points (impossible for a summary against a source, but cheap to guard) takes the
  pure-Python path. Exact for any hashable items (equality through a dict), and the path for larger pairs
  and for items that are not str. A ``LcsSource`` codes one long sequence (a source) once for many texts
  against it: each further text then costs only the mapping of its own tokens.
- ``lcs_length_bits``: Hyyrö's formulation of the Allison-Dix algorithm in pure Python, one DP column as a
  bit vector held in a Python int, so each symbol of the shorter sequence costs a handful of big-int
  operations over ceil(m / 30) machine digits instead of m Python steps; O(n * m / w). The fallback when
  rapidfuzz is missing, and the reference the tests hold the rapidfuzz paths to (with ``lcs_length_dp``).

Mapping tokens to ints first would make the list path exact for any items, but the mapping is Python work per
token and costs more than the codes at every size bench/lcs.py measures.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence

__all__ = [
    "HAVE_RAPIDFUZZ",
    "LcsSource",
    "lcs_length",
    "lcs_length_bits",
    "lcs_length_dp",
    "lcs_length_lists",
    "lcs_length_rapidfuzz",
]

MAX_CODE_POINT = 0x10FFFF
MAX_BYTE_CODE = 0xFF
# Texts an LcsSource measures through lcs_length before preparing its source: preparing costs about two
# lcs_length calls, so a source seen only with its reference and one summary is never prepared.
PREPARE_AFTER = 2
# Up to these sizes rapidfuzz on the token lists beats the codes (bench/lcs.py, CPU time of 5 rounds, real
# and random pairs): below the first the DP is small enough that the per-token mapping in Python dominates;
# past the second, rapidfuzz's tables over the longer side outgrow the CPU's cache.
LIST_PATH_MAX_CELLS = 600_000
LIST_PATH_MAX_LONGER = 10_000

_similarity: Callable[[str | bytes, str | bytes], int] | None
try:  # pragma: no branch - rapidfuzz is pinned; the fallback is for installs without it
    from rapidfuzz.distance.LCSseq import similarity as _similarity
except ImportError:  # pragma: no cover
    _similarity = None

HAVE_RAPIDFUZZ = _similarity is not None


def _as_codes(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[bytes, bytes] | tuple[str, str] | None:
    """Both sequences with one code per token, equal tokens as equal codes, in their original order, less
    the tokens of the longer sequence that the shorter one lacks.

    Dropping those leaves the LCS as it is (they can never match) and shortens what rapidfuzz reads. The
    shorter sequence's distinct tokens are numbered 1, 2, ...: bytes when the numbers fit in a byte,
    otherwise strings of code points; None when the shorter side has more distinct tokens than there are
    code points. (Building the code from the tokens both sides share, as before, measured slower: it is a
    second pass over the longer side.)
    """
    swapped = len(a) > len(b)
    short, long = (b, a) if swapped else (a, b)
    distinct = set(short)
    # filter(None, map(dict.get, ...)) drops the unknown tokens (get gives None) in C; codes are never 0.
    if len(distinct) <= MAX_BYTE_CODE:
        numbers = dict(zip(distinct, range(1, MAX_BYTE_CODE + 1), strict=False))
        short_codes = bytes(map(numbers.__getitem__, short))
        long_codes = bytes(filter(None, map(numbers.get, long)))
        return (long_codes, short_codes) if swapped else (short_codes, long_codes)
    if len(distinct) > MAX_CODE_POINT:
        return None
    characters = dict(zip(distinct, map(chr, range(1, len(distinct) + 1)), strict=True))
    short_text = "".join(map(characters.__getitem__, short))
    long_text = "".join(filter(None, map(characters.get, long)))
    return (long_text, short_text) if swapped else (short_text, long_text)


def lcs_length_rapidfuzz(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """``lcs_length`` through rapidfuzz's LCSseq on codes; raises RuntimeError without rapidfuzz."""
    if _similarity is None:
        raise RuntimeError("rapidfuzz is not installed")
    if len(a) == 0 or len(b) == 0:
        return 0
    coded = _as_codes(a, b)
    if coded is None:
        return lcs_length_bits(a, b)
    return int(_similarity(*coded))


def lcs_length_lists(a: Sequence[Hashable], b: Sequence[Hashable]) -> int | None:
    """``lcs_length`` through rapidfuzz's LCSseq on the token lists themselves, when every token is a str;
    None when one is not (or without rapidfuzz). Exact unless two distinct tokens share a 64-bit hash (see
    the module's docstring)."""
    if _similarity is None:
        return None
    try:
        # str.join is the cheapest all-str check there is: one C pass that raises on anything else.
        "".join(a)  # type: ignore[arg-type]
        "".join(b)  # type: ignore[arg-type]
    except TypeError:
        return None
    return int(_similarity(a, b))  # type: ignore[arg-type]


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (any hashable items), by the path that is
    fastest for their sizes (the module's docstring)."""
    if _similarity is None:
        return lcs_length_bits(a, b)
    shorter, longer = sorted((len(a), len(b)))
    if longer <= LIST_PATH_MAX_LONGER and shorter * longer <= LIST_PATH_MAX_CELLS:
        found = lcs_length_lists(a, b)
        if found is not None:
            return found
    return lcs_length_rapidfuzz(a, b)


class LcsSource:
    """One sequence (a source) against which the LCS lengths of many texts are measured.

    ``LcsSource(source).lcs_length(text) == lcs_length(text, source)``. The first ``PREPARE_AFTER`` texts
    go through ``lcs_length``; the next one prepares the source (its distinct tokens get code points 1, 2,
    ... in order of first appearance and the coded source is kept, which costs about two ``lcs_length``
    calls), after which a text costs one pass over its own tokens (those the source lacks are dropped) and
    rapidfuzz's LCS. So a source measured against a reference and one summary costs what two
    ``lcs_length`` calls cost, and one shared by a dozen summaries far less. Without rapidfuzz every call
    takes ``lcs_length``'s fallback.
    """

    __slots__ = ("_characters", "_coded", "_unpreparable", "_uses", "tokens")

    def __init__(self, tokens: Sequence[Hashable]) -> None:
        self.tokens = tokens
        self._characters: dict[Hashable, str] | None = None
        self._coded = ""
        self._uses = 0
        self._unpreparable = _similarity is None

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def prepared(self) -> bool:
        """Whether the coded source is built."""
        return self._characters is not None

    def prepare(self) -> bool:
        """Code the source now rather than at the text after the first ``PREPARE_AFTER``; False when it
        cannot be (no rapidfuzz, or more distinct tokens than Unicode has code points)."""
        if self._characters is None and not self._unpreparable:
            self._unpreparable = self._code_source() is None
        return self._characters is not None

    def _code_source(self) -> dict[Hashable, str] | None:
        # defaultdict's factory runs in C, so the source is coded in one C-level pass. An exhausted
        # supply of code points raises StopIteration inside map(), which join() takes as the end:
        # a short result is how a vocabulary beyond Unicode shows.
        characters: defaultdict[Hashable, str] = defaultdict(map(chr, range(1, MAX_CODE_POINT + 1)).__next__)
        coded = "".join(map(characters.__getitem__, self.tokens))
        if len(coded) != len(self.tokens):
            return None
        characters.default_factory = None
        # The coded source first: a thread that sees the codes then finds the source they code (two threads
        # coding at once build identical codes, so either's pair is right).
        self._coded = coded
        self._characters = characters
        return characters

    def lcs_length(self, text: Sequence[Hashable]) -> int:
        """Length of the longest common subsequence of ``text`` and the source."""
        similarity = _similarity
        if similarity is None or len(text) == 0 or len(self.tokens) == 0:
            return lcs_length(text, self.tokens)
        characters = self._characters
        if characters is None:
            self._uses += 1
            if self._uses > PREPARE_AFTER:
                self.prepare()
            characters = self._characters
            if characters is None:
                return lcs_length(text, self.tokens)
        # The text's tokens the source lacks are dropped (they never match), as in _as_codes.
        return int(similarity("".join(filter(None, map(characters.get, text))), self._coded))


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
