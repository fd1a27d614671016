"""Canonical encoding and hashing, with the memo for long values."""

from __future__ import annotations

import hashlib
import json

import pytest

from mcp_harness import jsonvalue
from mcp_harness.errors import InvalidArgument


def test_memoised_results_equal_fresh_ones():
    text = "ünïcode text, " * 1000
    first = jsonvalue.canonical(text)
    again = jsonvalue.canonical("".join(list(text)))  # an equal string, another object
    assert first == again == json.dumps(text, ensure_ascii=False).encode()
    assert jsonvalue.value_hash(first) == jsonvalue.value_hash(bytes(again))
    assert jsonvalue.value_hash(first) == hashlib.blake2b(first, digest_size=16).hexdigest()


def test_strings_that_share_a_fingerprint_keep_their_own_encodings():
    """The memo is keyed by length and three short samples: a string differing elsewhere must
    still be encoded afresh, however the two alternate."""
    base = "a" * 3000 + "b" * 3000
    edited = base[:1000] + '"quoted"' + base[1008:]  # same length, head, middle and tail
    assert jsonvalue._fingerprint(base) == jsonvalue._fingerprint(edited)
    for _ in range(3):
        for text in (base, edited):
            assert jsonvalue.canonical(text) == json.dumps(text, ensure_ascii=False).encode()


def test_a_replaced_memo_entry_keeps_the_bound():
    memo = jsonvalue._Memo(10_000)
    for i in range(10):
        memo.put("same", i, 1_000)
    assert memo.get("same") == 9 and memo._total == 1_000


def test_invalid_long_strings_are_refused_every_time():
    bad = "x" * 5000 + "\ud800"
    for _ in range(2):  # a failure is never remembered as a result
        with pytest.raises(InvalidArgument, match="lone surrogate"):
            jsonvalue.canonical(bad)


def test_the_memo_stays_within_its_bound():
    memo = jsonvalue._Memo(100_000)
    for i in range(200):
        memo.put(f"{i}" * 10, i, 2_000)
    assert memo._total <= 100_000 and len(memo._items) == 50
    assert memo.get("199" * 10) == 199 and memo.get("0" * 10) is None  # the oldest went first
    memo.put("big", 1, 60_000)  # over a quarter of the bound: not kept
    assert memo.get("big") is None


def test_key_bytes_counts_what_json_writes_for_every_ascii_character():
    keys = [chr(c) for c in range(128)] + ["plain_key", 'a"b', "a\\b", "é", "\u2028", ""]
    for key in keys:
        assert jsonvalue.key_bytes(key) == len(json.dumps(key, ensure_ascii=False).encode()), repr(key)
