"""The prefix tree of the transformers backend: structure, token counts and schedule
checked against brute force on small token lists (no model needed)."""
from __future__ import annotations

import itertools
import random

import pytest

from fairness_tests.models.backends.prefix_tree import (
    PrefixTree,
    balanced_cut_points,
    cut_points,
    makespan,
)


def distinct_prefixes(prompts) -> int:
    """What an uncompressed trie computes: every distinct prefix once."""
    return len({tuple(p[:i]) for p in prompts for i in range(1, len(p) + 1)})


def random_prompts(rng: random.Random, n: int) -> list[list[int]]:
    """Prompts built like BBQ ones: a common head, a few contexts, questions, rotations."""
    head = [2, 105, 2364, 107]
    out = []
    for _ in range(n):
        ctx = rng.choice([[5, 6, 7, 8, 9], [5, 6, 7, 1, 1, 1], [11, 12], [5, 6]])
        q = rng.choice([[20, 21], [20, 22, 23], [30]])
        tail = [rng.randrange(40, 44) for _ in range(rng.randrange(1, 5))]
        out.append(head + ctx + q + tail)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_paths_spell_the_prompts_and_tokens_match_brute_force(seed):
    rng = random.Random(seed)
    prompts = random_prompts(rng, rng.randrange(1, 40))
    tree = PrefixTree(prompts, min_saving=0)
    assert tree.tokens_computed == distinct_prefixes(prompts)
    assert tree.prompt_tokens == sum(map(len, prompts))
    for i, p in enumerate(prompts):
        node = tree.end_of[i]
        assert i in node.ends
        assert [t for n in node.path() for t in n.tokens] == p
    # merging small shared segments never loses a prompt and only adds tokens
    merged = PrefixTree(prompts)
    assert merged.tokens_computed >= tree.tokens_computed
    for i, p in enumerate(prompts):
        assert [t for n in merged.end_of[i].path() for t in n.tokens] == p
    assert merged.root.n_below == len(prompts)


def test_counts_on_a_hand_built_example():
    # a b c d | a b c e | a b x | a b c d (duplicate) | a b c (a prefix of others)
    prompts = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9], [1, 2, 3, 4], [1, 2, 3]]
    tree = PrefixTree(prompts, min_saving=0)
    # distinct prefixes: a, ab, abc, abcd, abce, abx = 6 tokens, against 4+4+3+4+3 = 18
    assert tree.tokens_computed == 6 and tree.prompt_tokens == 18
    assert tree.end_of[0] is tree.end_of[3]                 # identical prompts, one node
    abc = tree.end_of[4]
    assert abc.tokens == (3,) and abc.ends == [4] and len(abc.children) == 2
    assert tree.end_of[0].parent is abc and tree.end_of[2].parent is abc.parent
    assert abc.parent.tokens == (1, 2) and abc.parent.n_below == 5
    # min_saving=2: "c" (1 token) ends a prompt, so it stays; "ab" saves 2*(2-1)=2, stays
    assert PrefixTree(prompts, min_saving=2).tokens_computed == 6
    # min_saving=3: "ab" saves 2 < 3 and is folded into "c..." and "x": a b counted twice
    assert PrefixTree(prompts, min_saving=3).tokens_computed == 8


def test_batches_put_parents_first_and_free_caches_after_their_last_chunk():
    rng = random.Random(7)
    prompts = random_prompts(rng, 60)
    tree = PrefixTree(prompts)
    done, freed_early = set(), []
    total = 0
    for batch in tree.batches(max_rows=5, chunk_tokens=80):
        assert 1 <= len(batch) <= 5
        for n in batch:
            assert n.parent is tree.root or n.parent in done
            for a in n.path()[:-1]:
                if a.kv is None:
                    freed_early.append(a)
        for n in batch:
            n.kv = "cached"
            done.add(n)
            total += n.length
    assert freed_early == []                                # never dropped while needed
    assert done == set(tree.nodes) and total == tree.tokens_computed
    assert all(n.kv is None for n in tree.nodes)            # all dropped at the end


def test_cut_points_are_optimal_by_enumeration():
    rng = random.Random(3)
    for _ in range(30):
        lengths = sorted(rng.randrange(1, 30) for _ in range(rng.randrange(1, 9)))
        max_rows, overhead = rng.randrange(1, 5), rng.randrange(0, 40)
        groups = cut_points(lengths, max_rows, overhead)
        assert [i for g in groups for i in range(*g)] == list(range(len(lengths)))

        def cost(gs, overhead=overhead, lengths=lengths):
            return sum(overhead + (j - i) * lengths[j - 1] for i, j in gs)
        best = None
        n = len(lengths)
        for cuts in itertools.product([0, 1], repeat=n - 1):       # every partition
            bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
            gs = list(itertools.pairwise(bounds))
            if all(j - i <= max_rows for i, j in gs):
                best = cost(gs) if best is None else min(best, cost(gs))
        assert cost(groups) == best


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_batch_groups_need_only_earlier_groups_and_share_small_groups(workers):
    """The batches of one group may run side by side: none holds an ancestor of a node
    of the same group; a group of n nodes is cut into batches of at most
    min(max_rows, ceil(n / workers)) rows; flattened, the groups are ``batches``."""
    rng = random.Random(11)
    prompts = random_prompts(rng, 80)
    tree = PrefixTree(prompts)
    seen_before: set = set()
    flat = []
    for group in tree.batch_groups(max_rows=6, chunk_tokens=120, workers=workers):
        members = [n for b in group for n in b]
        n = len(members)
        cap = min(6, -(-n // workers))
        assert all(len(b) <= cap for b in group)
        assert len(group) >= -(-n // cap)
        for node in members:
            assert all(a in seen_before for a in node.path()[:-1])   # ancestors: earlier
            node.kv = "cached"
        seen_before.update(members)
        flat.extend(map(tuple, group))
    again = PrefixTree(prompts)
    assert [tuple(n.first for n in b) for b in flat] == \
        [tuple(n.first for n in b) for b in again.batches(6, 120, workers=workers)]
    assert seen_before == set(tree.nodes)


def test_balanced_cuts_on_paper_and_never_finish_later_than_plain_cuts():
    # LPT on 2 workers: 5 | 4, then 3 -> 7, 3 -> 8, 3 -> 10
    assert makespan([5, 4, 3, 3, 3], 2) == 10 and makespan([5, 4, 3], 1) == 12
    # 60 equal segments of 10 tokens, overhead 48, at most 32 rows: the cheapest cut is
    # 32 + 28 rows (makespan 48 + 320 = 368); 30 + 30 finishes at 348; 4 x 15 at 396
    assert sorted(b - a for a, b in cut_points([10] * 60, 32, 48)) == [28, 32]
    assert balanced_cut_points([10] * 60, 32, 48, workers=2) == [(0, 30), (30, 60)]
    rng = random.Random(5)
    for _ in range(200):
        lengths = sorted(rng.randrange(1, 60) for _ in range(rng.randrange(1, 80)))
        rows, over, w = rng.randrange(1, 33), rng.randrange(0, 64), rng.randrange(1, 5)
        got = balanced_cut_points(lengths, rows, over, w)
        assert [i for a, b in got for i in range(a, b)] == list(range(len(lengths)))
        assert all(b - a <= rows for a, b in got)
        cost = [over + (b - a) * lengths[b - 1] for a, b in got]
        plain = [over + (b - a) * lengths[b - 1] for a, b in cut_points(lengths, rows, over)]
        assert makespan(cost, w) <= makespan(plain, w)
        if w == 1:
            assert got == cut_points(lengths, rows, over)
