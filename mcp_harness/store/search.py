"""A parsed full-text query (see `search/service.py`) written for each backend: an FTS5 MATCH
expression for SQLite, a `websearch_to_tsquery` text for PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_harness.errors import InvalidArgument

#: a word or phrase, and whether it is a prefix
Term = tuple[str, bool]


Shape = tuple[tuple[int, ...], int]  #: a full-text query's shape (`Terms.shape`): its statement's form


@dataclass
class Terms:
    groups: list[list[Term]] = field(default_factory=list)  #: all groups must match; one term of each
    excluded: list[Term] = field(default_factory=list)

    def fts5(self) -> str:
        """The FTS5 expression: every term a quoted string (no FTS5 syntax can come through)."""

        def term(t: Term) -> str:
            return '"' + t[0].replace('"', '""') + '"' + ("*" if t[1] else "")

        def group(g: list[Term]) -> str:
            return term(g[0]) if len(g) == 1 else "(" + " OR ".join(map(term, g)) + ")"

        out = " AND ".join(map(group, self.groups))
        if self.excluded:
            out = f"({out}) NOT (" + " OR ".join(map(term, self.excluded)) + ")"
        return out

    def websearch(self) -> str:
        """The `websearch_to_tsquery` text: phrases quoted, OR between alternatives, `-` before exclusions."""

        def term(t: Term) -> str:
            return '"' + t[0] + '"' if " " in t[0] else t[0]

        parts = [" OR ".join(map(term, g)) for g in self.groups]
        parts += ["-" + term(t) for t in self.excluded]
        return " ".join(parts)

    @property
    def shape(self) -> Shape:
        """What the PostgreSQL statement's form depends on (the values are parameters)."""
        return tuple(len(g) for g in self.groups), len(self.excluded)

    def params(self, dialect: str) -> dict[str, str]:
        """The query's parameters: `:q` (SQLite's MATCH), `:t0`, `:t1` ... (PostgreSQL's terms)."""
        if dialect == "sqlite":
            return {"q": self.fts5()}
        words = [t[0] for g in self.groups for t in g] + [t[0] for t in self.excluded]
        return {f"t{i}": w for i, w in enumerate(words)}


#: the text each table's search runs over (PostgreSQL: the expressions the GIN indexes are built on)
PROGRESS_TEXT = "to_tsvector('english'::regconfig, summary || ' ' || coalesce(details, ''))"
TASK_TEXT = (
    "to_tsvector('english'::regconfig, title || ' ' || coalesce(description, '') || ' ' || "
    "coalesce(result, '') || ' ' || coalesce(verification, ''))"
)


def tsquery(shape: Shape) -> str:
    """A PostgreSQL tsquery expression of `:t0`... for a query of this shape: each term a phrase query
    (a word is a phrase of one; punctuation cannot break it), alternatives `||`, groups `&&`."""
    groups, excluded = shape
    n = 0

    def term() -> str:
        nonlocal n
        n += 1
        return f"phraseto_tsquery('english'::regconfig, :t{n - 1})"

    parts = ["(" + " || ".join(term() for _ in range(size)) + ")" for size in groups]
    out = " && ".join(parts)
    if excluded:
        out = f"({out}) && !!(" + " || ".join(term() for _ in range(excluded)) + ")"
    return out


def over_time_limit(seconds: float) -> InvalidArgument:
    """What a search stopped at its time limit raises."""
    return InvalidArgument(
        f"the search ran past its time limit of {seconds:g} s and was stopped: narrow it (longer prefixes, "
        "fewer alternatives, rarer words)"
    )


def search_refused(exc: Exception) -> Exception:
    """What a failed search raises: `invalid_argument` for a query the full-text engine refused (the
    query's terms are quoted, so this is a backstop), else the error itself."""
    if "fts5" in str(exc).lower() or "tsquery" in str(exc).lower():
        return InvalidArgument('the search query could not be parsed: use words, "phrases", OR, -word')
    return exc
