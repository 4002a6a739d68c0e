"""One rule for "did you mean ...?", whether a flag, a sub-command, a choice or a node name was
mistyped, so that every command suggests the same way.

A word that is not one of the known ones gets the known word it begins, the shortest first
(`--al` for `--all`, `rol` for `roll`); else the same word in another case (`JSON`); else the
closest spelling, if it is close and no other is as close (`restrat` for `restart`); else
nothing: a guess far from every real name, or one among equals, helps no one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "did_you_mean"]

# difflib's ratio above which a spelling counts as close: `jsn` for `json` (0.86) and
# `forse` for `force` (0.8) are; `zzzz` for `--all` is not.
CUTOFF = 0.6


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word `word` most likely meant, or None."""
    candidates = list(dict.fromkeys(known))
    if not word or word in candidates:
        return None
    longer = sorted((k for k in candidates if k.startswith(word)), key=len)
    if longer:
        return longer[0]
    same = [k for k in candidates if k.lower() == word.lower()]
    if same:
        return same[0]
    scores = {k: difflib.SequenceMatcher(None, word, k).ratio() for k in candidates}
    best = max(scores.values(), default=0.0)
    nearest = [k for k, score in scores.items() if score == best]
    # Two names as close as each other: a guess between them would mislead half the time.
    return nearest[0] if best >= CUTOFF and len(nearest) == 1 else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`; did you mean X?` to end a one-line error, or "" when nothing is close."""
    match = closest(word, known)
    return f"; did you mean {match}?" if match is not None else ""
