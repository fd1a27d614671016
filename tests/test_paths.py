"""Path reservations (issue 28): the overlap rule, and claims, reserve/unreserve and revival through
the official MCP client, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import call, fail, mcp_client

from mcp_harness import clock
from mcp_harness.tasks.patterns import PatternError, matcher, matches, normalize, overlap

pytestmark = pytest.mark.anyio


# -- the overlap rule (pure) ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("src/a.py", "src/a.py", True),
        ("src/a.py", "src/b.py", False),  # two plain paths: disjoint unless one holds the other
        ("src/api", "src/api/x.py", True),  # a folder holds its files
        ("src/api/", "src/api/x.py", True),
        ("src/", "docs/", False),
        ("src/*.py", "docs/*.md", False),  # anchors diverge
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/a.md", False),  # a plain path the pattern does not match
        ("src/*", "src/a/b.py", True),  # matches a folder above it
        ("src/*/x.py", "src/a", True),  # unsure (more segments than the plain path): overlap
        ("**/*.sql", "docs/x.md", True),  # `**`: unsure, overlap
        ("*.py", "docs/x.md", False),  # anchored at the root: top-level Python files only
        ("*.py", "x.py", True),
        ("**/*.py", "docs/x.md", True),
        ("src/[ab].py", "src/c.py", False),
        ("src/[ab].py", "src/a.py", True),
    ],
)
def test_overlap_is_conservative(a, b, expected):
    assert overlap(a, b) is expected and overlap(b, a) is expected


def test_disjoint_means_no_file_matches_both():
    """Where the rule says disjoint, no file of a sample tree matches both patterns (the rule may only err
    towards overlap)."""
    files = ["src/a.py", "src/a.md", "src/b.py", "src/c.py", "src/a/b.py", "src/api/x.py", "docs/x.md", "x.py"]
    patterns = [
        "src/a.py",
        "src/b.py",
        "src/api",
        "src/",
        "docs/",
        "src/*.py",
        "docs/*.md",
        "src/*",
        "src/[ab].py",
        "src/a.md",
        "*.py",
        "**/*.md",
    ]
    for a in patterns:
        assert [f for f in files if matcher(a)(f)] == [f for f in files if matches(a, f)], a  # the guard's
        for b in patterns:
            both = [f for f in files if matches(a, f) and matches(b, f)]
            if both:
                assert overlap(a, b), (a, b, both)


_SEGMENTS = st.sampled_from(["src", "docs", "a", "ab", "a.py", "b.md", "*", "*.py", "a*", "?", "[ab]", "**"])
_FILES = st.lists(st.sampled_from(["src", "docs", "a", "ab", "a.py", "b.md", "x", "c.py"]), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_SEGMENTS, min_size=1, max_size=4),
    st.lists(_SEGMENTS, min_size=1, max_size=4),
    st.booleans(),
    st.booleans(),
    st.lists(_FILES, min_size=1, max_size=30),
)
def test_the_rule_never_calls_overlapping_patterns_disjoint(a, b, slash_a, slash_b, files):
    """Property: whenever a file matches both patterns, `overlap` says so (it may only err towards
    overlap)."""
    pa, pb = "/".join(a) + "/" * slash_a, "/".join(b) + "/" * slash_b
    paths = ["/".join(f) for f in files]
    if any(matches(pa, f) and matches(pb, f) for f in paths):
        assert overlap(pa, pb) and overlap(pb, pa), (pa, pb)


#: patterns a regular expression with backtracking takes seconds to minutes on (32, 14 and 300 characters)
HOSTILE = ["src/tests/*?*?*?*?*?*?*?*?*?*Z", "*a*a*a*a*a*a*b", "*?" * 149 + "Z", "src/" + "?*" * 148]


def test_hostile_patterns_are_decided_at_once():
    """Against a long name, against each other and against ordinary patterns: each decision takes well
    under a second (a backtracking match took 1.9 s for a 40-character name, and grows exponentially)."""
    import time

    long_names = ["src/tests/" + "a" * 200, "a" * 250, "src/" + "ab" * 120 + "/x.py", "src/tests/" + "Z" * 80 + "Q"]
    others = [*HOSTILE, *long_names, "src/", "src/tests/*.py", "**/*Z", "**/a*a*a*a*a*a*c"]
    for a in HOSTILE:
        for b in others:
            started = time.perf_counter()
            overlap(a, b)
            overlap.cache_clear()
            assert time.perf_counter() - started < 0.5, (a, b)
        for name in long_names:
            started = time.perf_counter()
            matches(a, name)
            assert time.perf_counter() - started < 0.5, (a, name)
    assert not overlap(HOSTILE[0], "src/tests/" + "a" * 200) and overlap(HOSTILE[0], "src/tests/" + "a" * 200 + "Z")
    assert matches(HOSTILE[1], "xaaaaaab/c.py") and not matches(HOSTILE[1], "a" * 250)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("src/*/x.py", "src/a/*.py", True),  # src/a/x.py
        ("src/*/x.py", "src/*/y.py", False),
        ("src/*/x.py", "src/a/y.py", False),
        ("src/**/x.py", "src/a/*/y.py", True),  # src/a/b/y.py/x.py: a folder named y.py holds everything below
        ("*.py", "*.md", False),  # one top-level name cannot end in both
        ("**/*.py", "**/*.md", True),  # a.py/b.md
        ("src/a*", "src/*b", True),
        ("src/a?", "src/?b?", False),  # two characters against three
        ("src/[ab]x", "src/[bc]x", True),
        ("src/[ab]x", "src/[!ab]x", False),
        ("src/[a-c]", "src/[d-f]", False),
        ("docs/**", "docs", True),
        ("src/api/", "src/api", True),
    ],
)
def test_overlap_is_exact(a, b, expected):
    """Two patterns overlap exactly when some path is named by both: disjoint ones are told apart too."""
    assert overlap(a, b) is expected and overlap(b, a) is expected


def test_a_comparison_past_the_work_limit_overlaps(monkeypatch):
    """When unsure, they overlap: a pair whose comparison runs past the limit is called overlapping."""
    from mcp_harness.tasks import patterns as paths

    assert not overlap("src/*/x.py", "src/*/y.py")
    overlap.cache_clear()
    monkeypatch.setattr(paths, "WORK_LIMIT", 1)
    assert overlap("src/*/x.py", "src/*/y.py")
    overlap.cache_clear()


def test_overlap_is_exact_for_short_patterns():
    """Every pair of short patterns (at most two segments of a small alphabet) overlaps exactly when some
    path of up to three names of one or two characters is named by both (where a pair has such a path,
    it has one that short): no pair is called overlapping without one."""
    import itertools
    import random

    rng = random.Random(7)
    segments = ["a", "b", "ab", "*", "a*", "*b", "?", "??", "[ab]", "[!a]", "**", "*a*", "b?", "[!ab]*"]
    patterns = sorted({"/".join(rng.choice(segments) for _ in range(rng.randint(1, 2))) for _ in range(70)})
    names = ["".join(c) for size in (1, 2) for c in itertools.product("abc", repeat=size)]
    files = ["/".join(c) for depth in (1, 2, 3) for c in itertools.product(names, repeat=depth)]
    named = {p: {f for f in files if matches(p, f)} for p in patterns}
    wrong = [(a, b) for a in patterns for b in patterns if overlap(a, b) is not bool(named[a] & named[b])]
    assert not wrong, wrong[:5]


_NAMES = st.text(alphabet="abxy.", min_size=1, max_size=5)


@st.composite
def _paths_and_patterns(draw: st.DrawFn) -> tuple[str, str, str]:
    """A path and two patterns that both name it (each segment kept, or made a wildcard that matches it,
    or stars and `**` put in), and sometimes a deeper path below it."""
    names = draw(st.lists(_NAMES, min_size=1, max_size=4))

    def pattern() -> str:
        out: list[str] = []
        for name in names:
            if draw(st.booleans()) and draw(st.booleans()):
                out.append("**")
            way = draw(st.sampled_from(["keep", "star", "some", "set"]))
            if way == "star":
                out.append("*")
            elif way == "some":  # some characters become `?`, some runs `*`
                out.append("".join(draw(st.sampled_from([c, "?", "*" + c, c + "*"])) for c in name))
            elif way == "set":
                out.append("".join(f"[{c}z]" if draw(st.booleans()) else c for c in name))
            else:
                out.append(name)
        cut = draw(st.integers(1, len(out)))  # a pattern for a folder above the path names it too
        return "/".join(out[:cut]) + ("/" if draw(st.booleans()) else "")

    path = "/".join(names) + "".join("/" + n for n in draw(st.lists(_NAMES, max_size=2)))
    return path, pattern(), pattern()


@settings(max_examples=600, deadline=None)
@given(_paths_and_patterns())
def test_patterns_that_name_one_path_overlap(case):
    """Property: two patterns that both name one path (`src/*/x.py` and `src/a/*.py`, for `src/a/x.py`)
    overlap, whichever is asked first."""
    path, a, b = case
    assert matches(a, path) and matches(b, path), case
    assert overlap(a, b) and overlap(b, a), case


_REF_SEGMENTS = st.sampled_from(["src", "a", "ab", "a.py", "*", "*.py", "a*", "*b", "?", "??", "[ab]", "[!a]*", "**"])
_REF_FILES = st.lists(st.sampled_from(["src", "a", "ab", "a.py", "b", "ba", "x.py", "abb"]), min_size=1, max_size=5)


@settings(max_examples=600, deadline=None)
@given(st.lists(_REF_SEGMENTS, min_size=1, max_size=4), st.booleans(), st.lists(_REF_FILES, min_size=1, max_size=20))
def test_matching_is_gitignores(segments, slash, files):
    """Property: a pattern names what gitignore's matching (pathspec, anchored at the root) says it
    does, the path itself read as a folder too (a folder pattern also names a submodule or a symlink of
    that name, and `x/**` the folder `x`)."""
    import pathspec

    pattern = "/".join(segments) + "/" * slash
    spec = pathspec.GitIgnoreSpec.from_lines(["/" + pattern])
    for path in ("/".join(f) for f in files):
        expected = spec.match_file(path) or spec.match_file(path + "/")
        assert matches(pattern, path) is expected, (pattern, path)
        assert matcher(pattern)(path) is expected, (pattern, path)


@pytest.mark.parametrize("bad", ["", "  ", "!src/a", "#x", "../up", "src/../x", "a//b", "a" * 301])
def test_bad_patterns_are_refused(bad):
    with pytest.raises(PatternError):
        normalize(bad)


def test_patterns_are_relative_to_the_root():
    assert normalize("./docs/") == "docs/" and normalize(" src/a.py ") == "src/a.py"


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        ("src\\api", "backslash"),  # a Windows separator: it would never match
        ("src\\*.py", "backslash"),
        ("C:/x", "drive letter"),
        ("c:", "drive letter"),
        ("/home/me/repo/src/a.py", "starts with '/'"),  # an absolute path
        ("/src/a.py", "starts with '/'"),
        ("~/repo/src", "home folder"),
    ],
)
def test_patterns_that_would_never_match_are_refused_saying_why(bad, what):
    """Accepted, these would reserve nothing (the trial's `src\\api` and `C:/x`): refused, saying what is wrong
    and that patterns are relative to the repository root, with forward slashes."""
    with pytest.raises(PatternError) as err:
        normalize(bad)
    assert what in str(err.value) and "relative to the repository root, with forward slashes" in str(err.value)
    assert normalize("a:b/c") == "a:b/c"  # a colon past the first character is a name's


@pytest.mark.parametrize("bad", ["src/[a-", "x[", "a/[]", "a/[!]", "a/[a-z]/[b"])
def test_a_set_that_is_never_closed_is_refused(bad):
    """git matches no file with an unclosed '[' (a fresh-eyes trial reserved `src/[a-` and the guard let a
    commit of that very file through): refused, saying how to write a set or a literal '['; the sets
    that are closed, `]` first in one included, stay patterns that match."""
    with pytest.raises(PatternError) as err:
        normalize(bad)
    assert "no ']'" in str(err.value) and "[[] for a literal [" in str(err.value)
    with pytest.raises(PatternError) as err:
        normalize("#notes.md")
    assert "write [#]: '[#]notes.md'" in str(err.value) and matches("[#]notes.md", "#notes.md")
    for good, file in (("src/[[]a-", "src/[a-"), ("a/[]]", "a/]"), ("a/[!]]x", "a/bx"), ("a/[a-z]/b", "a/q/b")):
        assert normalize(good) == good and matches(good, file), good


# -- through the tools ------------------------------------------------------------------------------------
def t(key: str, **kw) -> dict:
    return {"key": key, "title": f"task {key}", **kw}


async def test_a_claim_passes_over_reserved_paths_and_says_who_holds_them(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(
            a,
            "add_tasks",
            tasks=[
                t("api", paths=["src/api/"], priority=3),
                t("api-tests", paths=["src/api/handlers.py", "tests/"], priority=2),
                t("docs", paths=["docs/"]),
            ],
        )
        first = await call(a, "claim_task")
        assert first["task"]["key"] == "api" and first["task"]["paths"] == ["src/api/"]
        second = await call(b, "claim_task")  # api-tests overlaps alice's src/api/: passed over
        assert second["task"]["key"] == "docs"
        third = await call(b, "claim_task")
        assert third["task"] is None and third["reason"] == "paths_reserved"
        holder, *others = third["waiting_on"]  # the holders first, then the other waits' roots: b's own lease
        assert holder["key"] == "api" and holder["owner"] == "alice" and holder["paths"] == ["src/api/"]
        assert [(w["key"], w.get("mine")) for w in others] == [("docs", True)]
        assert 0 < third["retry_after"] <= 900 and holder["retry_after"] == third["retry_after"]
        named = await call(b, "claim_task", task_key="api-tests")
        assert named["reason"] == "paths_reserved"
        # the holder's own reservations never stop it
        own = await call(a, "claim_task")
        assert own["task"]["key"] == "api-tests"
        rows = {r["key"]: r for r in (await call(a, "list_tasks"))["tasks"]}
        assert rows["api"]["paths"] == ["src/api/"] and rows["docs"]["paths"] == ["docs/"]


async def test_hostile_patterns_do_not_hold_up_claims_and_reserves(db_url, workspace):
    """Patterns a backtracking match takes minutes on (held by one agent, claimed and reserved by another,
    against each other and against long plain names): each call answers in a few seconds at most."""
    import time

    plain = ["src/tests/" + "a" * 60, "a" * 80]
    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("held", paths=[*plain, *HOSTILE[2:]])])
        await call(a, "claim_task", task_key="held")
        await call(b, "add_tasks", tasks=[t("hostile", paths=HOSTILE[:2])])
        started = time.perf_counter()
        got = await call(b, "claim_task", task_key="hostile")
        assert time.perf_counter() - started < 5
        assert got["task"]["key"] == "hostile"  # no path is named by both (none of alice's ends in b or Z)
        lease = got["lease"]["token"]
        wanted = {
            "*?" * 140 + "Z": False,
            "src/tests/*?*?*?*?*?*?*?*?*?*a": False,
            "src/" + "*?" * 140: False,
            "*a" * 40 + "*b": True,
            "docs/*?*?*?*?*?*?*?*?*?*Z": True,
        }
        for pattern, free in wanted.items():
            started = time.perf_counter()
            args = {"task_key": "hostile", "action": "reserve", "lease_token": lease, "paths": [pattern]}
            if free:
                assert pattern in (await call(b, "update_task", **args))["held_paths"]
            else:
                assert (await fail(b, "update_task", **args)).code == "task_conflict", pattern
            assert time.perf_counter() - started < 5, pattern


async def test_a_reservation_ends_with_its_lease(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("one", paths=["src/"]), t("two", paths=["src/x.py"])])
        one = await call(a, "claim_task", lease_seconds=30)
        assert (await call(b, "claim_task"))["reason"] == "paths_reserved"
        await call(a, "update_task", task_key="one", action="release", lease_token=one["lease"]["token"])
        two = await call(b, "claim_task")  # released: the paths are free (bob takes the first ready task)
        assert two["task"]["key"] == "one"
        assert (await call(a, "claim_task"))["reason"] == "paths_reserved"
        clock.advance(31 * 30)  # bob's lease runs out: so does the reservation
        again = await call(a, "claim_task")
        assert again["task"] is not None


async def test_reserve_and_unreserve_under_a_lease(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("a", paths=["src/a/"]), t("b", paths=["src/b/"]), t("c")])
        got_a = await call(a, "claim_task")
        got_b = await call(b, "claim_task")
        ta, tb = got_a["lease"]["token"], got_b["lease"]["token"]
        held = await call(a, "update_task", task_key="a", action="reserve", lease_token=ta, paths=["docs/api.md"])
        assert held["held_paths"] == ["docs/api.md", "src/a/"]
        err = await fail(b, "update_task", task_key="b", action="reserve", lease_token=tb, paths=["docs/"])
        assert err.code == "task_conflict" and "'alice'" in err.text and "'a'" in err.text and "docs/api.md" in err.text
        assert "reserve it shared" not in err.text, "alice holds docs/api.md exclusively: sharing would not help"
        assert re.search(r"for \d+ s more;", err.text), err.text  # whole seconds, as a person reads them
        # a shared request that clashes with an exclusive reservation says so (not "reserve them shared")
        err = await fail(b, "update_task", task_key="b", action="reserve", lease_token=tb, paths=["docs/"], shared=True)
        assert err.code == "task_conflict" and "cannot reserve shared" in err.text, err.text
        assert "reserved exclusively by agent 'alice'" in err.text and "reserve it shared" not in err.text
        # shared: held back only by exclusive reservations
        await call(a, "update_task", task_key="a", action="reserve", lease_token=ta, paths=["README.md"], shared=True)
        shared = await call(
            b, "update_task", task_key="b", action="reserve", lease_token=tb, paths=["README.md"], shared=True
        )
        assert shared["shared_paths"] == ["README.md"]
        err = await fail(b, "update_task", task_key="b", action="reserve", lease_token=tb, paths=["src/a/x.py"])
        assert err.code == "task_conflict"
        # an exclusive request that clashes only with shared reservations: sharing is the way
        err = await fail(b, "update_task", task_key="b", action="reserve", lease_token=tb, paths=["README.md"])
        assert "reserved shared by agent 'alice'" in err.text and "reserve it shared" in err.text, err.text
        dropped = await call(a, "update_task", task_key="a", action="unreserve", lease_token=ta, paths=["docs/api.md"])
        assert dropped["held_paths"] == ["src/a/"]
        ok = await call(b, "update_task", task_key="b", action="reserve", lease_token=tb, paths=["docs/"])
        assert "docs/" in ok["held_paths"]
        err = await fail(a, "update_task", task_key="a", action="unreserve", lease_token=ta, paths=["nope"])
        assert err.code == "invalid_argument" and "does not hold" in err.text
        err = await fail(a, "update_task", task_key="a", action="reserve", lease_token=ta, paths=["!x"])
        assert err.code == "invalid_argument"
        err = await fail(a, "update_task", task_key="a", action="reserve", lease_token="wrong", paths=["x"])
        assert err.code == "lease_lost"
        err = await fail(a, "update_task", task_key="a", action="heartbeat", lease_token=ta, paths=["x"])
        assert err.code == "invalid_argument"
        brief = await call(a, "restore_state")
        (mine,) = brief["my_tasks"]
        assert mine["paths"] == ["src/a/"] and mine["shared_paths"] == ["README.md"]


async def test_a_revived_lease_gets_its_paths_back_only_where_free(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("a", paths=["src/"]), t("b", paths=["src/x.py"]), t("c", paths=["x/"])])
        got_a = await call(a, "claim_task", lease_seconds=10, task_key="a")
        clock.advance(11)  # alice's lease ran out; nobody re-claimed task a
        got_b = await call(b, "claim_task", task_key="b")
        assert got_b["task"]["key"] == "b"
        err = await fail(a, "update_task", task_key="a", action="heartbeat", lease_token=got_a["lease"]["token"])
        assert err.code == "lease_lost" and "'bob'" in err.text and "'b'" in err.text
        # once bob is done, alice's heartbeat brings the lease and its paths back
        await call(
            b,
            "update_task",
            task_key="b",
            action="complete",
            lease_token=got_b["lease"]["token"],
            verification="tested",
        )
        beat = await call(a, "update_task", task_key="a", action="heartbeat", lease_token=got_a["lease"]["token"])
        assert beat["lease"]["expires_in_seconds"] > 0
        got_c = await call(b, "claim_task", task_key="c")
        assert got_c["task"]["key"] == "c"
        await call(b, "add_tasks", tasks=[t("d", paths=["src/y.py"])])
        assert (await call(b, "claim_task", task_key="d"))["reason"] == "paths_reserved"


async def test_my_tasks_list_no_paths_for_a_lease_that_ran_out(db_url, workspace):
    """The trial: after a kill -9 and a resume, restore_state listed `my_tasks` with `expired: true` and
    still `paths: [...]`, which the guard (rightly) no longer held. A lease that is not live holds no
    paths; a heartbeat that revives it brings them back (where free) and my_tasks lists them again."""
    async with mcp_client(db_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[t("a", paths=["src/a/"])])
        got = await call(a, "claim_task", lease_seconds=10)
        token = got["lease"]["token"]
        await call(a, "update_task", task_key="a", action="reserve", lease_token=token, paths=["docs/"], shared=True)
        (live,) = (await call(a, "restore_state"))["my_tasks"]
        assert live["paths"] == ["src/a/"] and live["shared_paths"] == ["docs/"]
        clock.advance(11)
        (held,) = (await call(a, "restore_state"))["my_tasks"]
        assert held["lease"]["expired"] is True
        assert "paths" not in held and "shared_paths" not in held, held
        await call(a, "update_task", task_key="a", action="heartbeat", lease_token=token)
        (back,) = (await call(a, "restore_state"))["my_tasks"]
        assert back["paths"] == ["src/a/"] and back["shared_paths"] == ["docs/"]


async def test_too_many_paths_are_refused(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as a:
        err = await fail(a, "add_tasks", tasks=[t("a", paths=[f"f{i}" for i in range(51)])])
        assert err.code == "invalid_argument"
        err = await fail(a, "add_tasks", tasks=[t("a", paths=["../x"])])
        assert err.code == "invalid_argument" and "'../x'" in err.text
        for bad in ("src\\api", "C:/x", "/abs/path"):  # through the tool: the task is refused, saying why
            err = await fail(a, "add_tasks", tasks=[t("a", paths=[bad])])
            assert err.code == "invalid_argument" and "forward slashes" in err.text, err.text
        await call(a, "add_tasks", tasks=[t("a", paths=[f"f{i}" for i in range(50)])])
        got = await call(a, "claim_task")
        err = await fail(
            a, "update_task", task_key="a", action="reserve", lease_token=got["lease"]["token"], paths=["more"]
        )
        assert err.code == "invalid_argument" and "at most 50" in err.text
        err = await fail(
            a, "update_task", task_key="a", action="reserve", lease_token=got["lease"]["token"], paths=["docs\\x.md"]
        )
        assert err.code == "invalid_argument" and "backslash" in err.text and "forward slashes" in err.text


async def test_a_waiting_claim_is_not_woken_by_reserved_paths(db_url, workspace):
    """A waiting claim sleeps while the only claimable task's paths are reserved, and takes it once freed."""
    import anyio

    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("one", paths=["src/"]), t("two", paths=["src/x.py"])])
        one = await call(a, "claim_task", task_key="one")
        got: dict = {}

        async def wait() -> None:
            got.update(await call(b, "claim_task", wait_seconds=20))

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(0.5)
            assert not got  # still waiting: the reserved paths did not wake it
            await call(
                a,
                "update_task",
                task_key="one",
                action="complete",
                lease_token=one["lease"]["token"],
                verification="tested",
            )
        assert got["task"]["key"] == "two"


async def test_reservations_are_found_by_anchor_whatever_the_collation(db_url, workspace):
    """A reservation under, above or beside another's anchor (`src/a/b.py`, `src/`, `src/ab/`, `src/a0`),
    and patterns anchored at the root (`*.py`, `**/x`): found exactly where they may overlap."""
    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("held", paths=["src/a/"])])
        await call(a, "claim_task")
        specs = {
            "under": ["src/a/b.py"],
            "above": ["src/"],
            "beside": ["src/ab/"],
            "after": ["src/a0"],
            "root": ["*.py"],
            "deep": ["**/x"],
            "sibling": ["src/a.py"],
        }
        await call(b, "add_tasks", tasks=[t(k, paths=v) for k, v in specs.items()])
        outcome = {k: (await call(b, "claim_task", task_key=k, lease_seconds=10))["reason"] for k in specs}
        assert outcome == {
            "under": "paths_reserved",
            "above": "paths_reserved",
            "beside": None,
            "after": None,
            "root": None,
            "deep": "paths_reserved",
            "sibling": None,
        }


async def test_paths_travel_with_export_and_import(db_url, workspace, tmp_path):
    from support import settings_for

    from mcp_harness.service import Harness

    async with mcp_client(db_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[t("a", paths=["src/a/", "docs/a.md"]), t("b")])
    async with Harness.open(settings_for(db_url)) as h:
        lines = [line async for line in h.maintenance.export(workspace)]
    target = f"sqlite+aiosqlite:///{tmp_path / 'restored.db'}"
    async with Harness.open(settings_for(target)) as h:
        assert (await h.maintenance.import_lines(lines))["task"] == 2
    async with mcp_client(target, workspace, "bob") as b:
        rows = {r["key"]: r for r in (await call(b, "list_tasks"))["tasks"]}
        assert rows["a"]["paths"] == ["src/a/", "docs/a.md"] and "paths" not in rows["b"]
        # the same spec again is unchanged (paths are part of a task's content), other paths a conflict
        again = await call(b, "add_tasks", tasks=[t("a", paths=["src/a/", "docs/a.md"])])
        assert again["unchanged"] == ["a"]
        assert (await fail(b, "add_tasks", tasks=[t("a", paths=["src/"])])).code == "task_conflict"

    def spoiled(line: str) -> str:  # a pattern no task may hold
        record = json.loads(line)
        if record.get("type") == "task" and record.get("paths"):
            record["paths"] = json.dumps(["../x"])
        return json.dumps(record)

    bad = [spoiled(line) for line in lines]
    assert bad != [json.dumps(json.loads(line)) for line in lines]
    async with Harness.open(settings_for(f"sqlite+aiosqlite:///{tmp_path / 'bad.db'}")) as h:
        with pytest.raises(Exception, match=r"paths"):
            await h.maintenance.import_lines(bad)


async def test_the_board_card_shows_a_task_paths(db_url, workspace):
    from support import settings_for

    from mcp_harness.base import Identity
    from mcp_harness.service import Harness

    async with mcp_client(db_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[t("a", paths=["src/a/"]), t("b")])
        await call(a, "claim_task")
    async with Harness.open(settings_for(db_url)) as h:
        board = await h.console.board(Identity(workspace, "person"))
    cards = {card.key: card for column in board.columns for card in column.cards}
    assert cards["a"].paths == ("src/a/",) and cards["b"].paths == ()


async def test_a_session_end_ends_its_reservations(db_url, workspace):
    from support import settings_for

    from mcp_harness.base import Identity
    from mcp_harness.service import Harness

    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("a", paths=["src/"]), t("b", paths=["src/b.py"])])
        await call(a, "claim_task", task_key="a")
        assert (await call(b, "claim_task", task_key="b"))["reason"] == "paths_reserved"
        async with Harness.open(settings_for(db_url)) as h:  # alice's session ends (SessionEnd, stdin closed)
            assert await h.tasks.end_leases(Identity(workspace, "alice"), "the session ended") == ["a"]
        assert (await call(b, "claim_task", task_key="b"))["task"]["key"] == "b"


async def test_paths_reserved_lists_every_clashing_pattern_of_a_holder(db_url, workspace):
    async with mcp_client(db_url, workspace, "alice") as a, mcp_client(db_url, workspace, "bob") as b:
        await call(a, "add_tasks", tasks=[t("a", paths=["src/x.py", "src/y.py", "docs/"]), t("b", paths=["src/"])])
        await call(a, "claim_task", task_key="a")
        got = await call(b, "claim_task")
        assert got["reason"] == "paths_reserved"
        (holder,) = got["waiting_on"]
        assert holder == {
            "key": "a",
            "status": "claimed",
            "owner": "alice",
            "retry_after": got["retry_after"],
            "paths": ["src/x.py", "src/y.py"],
            "silent_seconds": 0,
            "alive": None,
        }
