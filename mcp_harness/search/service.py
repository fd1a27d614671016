"""Full-text search queries: one small language for both backends, parsed here so that a query means
the same on SQLite (FTS5) and PostgreSQL (tsvector), and a malformed one is refused the same way.

A query is words (all must match), `"quoted phrases"`, `OR` between two terms (either may match),
`-word` or `NOT word` (must not match) and `word*` (a prefix; on PostgreSQL the word's stem); `AND`
between words says what they mean already and is passed over. The operators are the upper-case words
(`and`, `or`, `not` are words to look for). Words are stemmed (English), case and accents aside.
Punctuation inside a word splits it (`store.py` finds "store py").

A term given twice counts once (`a OR a` is `a`; a group repeated is one group). So that no query can
make the engine walk most of its index, a query has at most `MAX_TERMS` different terms, of which at
most `MAX_PREFIXES` prefixes of at least `MIN_PREFIX` letters each."""

from __future__ import annotations

import re
from contextlib import AbstractAsyncContextManager

from mcp_harness.errors import InvalidArgument
from mcp_harness.store import Connection, Database
from mcp_harness.store.search import Term, Terms

_TOKEN = re.compile(r'\s*(?:(-?)"([^"]*)"|(\S+))')
MAX_TERMS = 16
MAX_PREFIXES = 4
MIN_PREFIX = 3
#: how long the reads of one search may take together before they are stopped
TIME_LIMIT_SECONDS = 5.0


def search_terms(query: str) -> Terms:
    """Parse `query`; `invalid_argument` for one that cannot be searched (empty, only exclusions,
    an unclosed quote, too many terms). A query of operators alone (`AND`) looks for them as words."""
    if query.count('"') % 2:
        raise InvalidArgument('the search query has an unclosed " (quote a phrase as "two words")')
    terms = _parse(query, operators=True)
    if not terms.groups and not terms.excluded:
        terms = _parse(query, operators=False)
    if not terms.groups:
        raise InvalidArgument('the search query has no word to look for (words, "phrases", OR, -word to exclude)')
    terms = _merged(terms)
    every = {t for g in terms.groups for t in g} | set(terms.excluded)
    if len(every) > MAX_TERMS:
        raise InvalidArgument(
            f"the search query has {len(every)} different terms, over the limit of {MAX_TERMS} "
            "(a word, phrase or prefix given twice counts once)"
        )
    prefixes = sorted(t[0] for t in every if t[1])
    short = [p for p in prefixes if len(p) < MIN_PREFIX]
    if short:
        raise InvalidArgument(
            f"a prefix needs at least {MIN_PREFIX} letters before the * (like migr*), got {short[0]}*"
        )
    if len(prefixes) > MAX_PREFIXES:
        raise InvalidArgument(
            f"the search query has {len(prefixes)} prefixes (word*), over the limit of {MAX_PREFIXES}"
        )
    return terms


def reading(db: Database, terms: Terms | None) -> AbstractAsyncContextManager[Connection]:
    """The read transaction of a listing: with a full-text query, one that is time-limited and never
    holds up the server's other work (`Database.search_read`), else a plain read."""
    return db.search_read(TIME_LIMIT_SECONDS) if terms is not None else db.read()


def _merged(terms: Terms) -> Terms:
    """`terms` with each term once: alternatives of a group, groups (as sets of alternatives) and
    exclusions; first occurrences keep their place."""
    groups: list[list[Term]] = []
    seen: set[frozenset[Term]] = set()
    for group in terms.groups:
        unique = list(dict.fromkeys(group))
        if frozenset(unique) not in seen:
            seen.add(frozenset(unique))
            groups.append(unique)
    return Terms(groups, list(dict.fromkeys(terms.excluded)))


def _parse(query: str, *, operators: bool) -> Terms:
    terms = Terms()
    pending_or = pending_not = False
    for match in _TOKEN.finditer(query):
        negated, phrase, word = match.group(1) == "-", match.group(2), match.group(3)
        if word is not None:
            if operators and word == "OR":
                pending_or = bool(terms.groups)
                continue
            if operators and word == "AND":  # all words must match anyway
                continue
            if operators and word == "NOT":
                pending_not = True
                continue
            negated = word.startswith("-")
            word = word.lstrip("-")
        negated, pending_not = negated or pending_not, False
        prefix = word is not None and word.endswith("*")
        text = phrase if phrase is not None else (word or "").rstrip("*")
        parts = re.findall(r"\w+", text)
        if not parts:
            continue
        term = (" ".join(parts), prefix and phrase is None)
        if negated:
            terms.excluded.append(term)
        elif pending_or:
            terms.groups[-1].append(term)
        else:
            terms.groups.append([term])
        pending_or = False
    return terms
