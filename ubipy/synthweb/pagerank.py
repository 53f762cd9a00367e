"""PageRank by power iteration, in pure Python: the ranked web's ground truth.

The textbook definition (Brin & Page 1998; Langville & Meyer, "Deeper inside PageRank",
2004): with damping d, a page's rank is (1 - d) / N, plus d times the rank flowing in
along links (each page splits its rank evenly over its distinct out-links), plus d times
the rank of the dangling pages (no out-links), spread uniformly over all N pages. The
iteration stops when the L1 change of one step falls below `tolerance`, or after
`max_iterations`.

Speed without numpy: each step gathers every page's share along all edges with one
`itemgetter` over the flat in-edge list (a loop in C), then sums each page's slice of
it (precomputed `slice` objects, in a `map`), so the Python-level work per step is a few
list passes, not a loop per edge.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter

DAMPING = 0.85
TOLERANCE = 1e-10
MAX_ITERATIONS = 200


@dataclass(frozen=True, slots=True)
class PageRank:
    """Scores by page id (summing to 1), the steps taken, the last step's L1 change and
    the wall time the iteration took."""

    scores: tuple[float, ...]
    iterations: int
    change: float
    seconds: float


def pagerank(
    out_links: Sequence[Sequence[int]],
    *,
    damping: float = DAMPING,
    tolerance: float = TOLERANCE,
    max_iterations: int = MAX_ITERATIONS,
) -> PageRank:
    """PageRank of the graph whose page `i` links the pages `out_links[i]` (ids in
    range(len(out_links)); repeated targets count once, a link to itself counts)."""
    started = time.perf_counter()
    n = len(out_links)
    if n == 0:
        return PageRank((), 0, 0.0, 0.0)
    targets = [sorted(set(links)) for links in out_links]
    degree = [len(t) for t in targets]
    dangling = [i for i, d in enumerate(degree) if d == 0]
    # incoming[v]: the pages that link v. Flattened, a step gathers their shares at once,
    # and gathered[slices[v]] are those flowing into v.
    incoming: list[list[int]] = [[] for _ in range(n)]
    for source, links in enumerate(targets):
        for target in links:
            incoming[target].append(source)
    # Two spare indexes, beyond every slice, so that the getter always returns a tuple.
    gather = itemgetter(*(s for group in incoming for s in group), 0, 0)
    slices, start = [], 0
    for group in incoming:
        slices.append(slice(start, start + len(group)))
        start += len(group)
    inverse = [1.0 / d if d else 0.0 for d in degree]
    scores = [1.0 / n] * n
    change, iterations = float("inf"), 0
    while iterations < max_iterations and change >= tolerance:
        share = list(map(float.__mul__, scores, inverse))
        gathered = gather(share)
        flowing = map(sum, map(gathered.__getitem__, slices))
        lost = sum(scores[i] for i in dangling)
        base = (1.0 - damping + damping * lost) / n
        new = [base + damping * x for x in flowing]
        change = sum(map(abs, map(float.__sub__, new, scores)))
        scores = new
        iterations += 1
    total = sum(scores)  # 1 up to rounding
    scores = [x / total for x in scores]
    return PageRank(tuple(scores), iterations, change, time.perf_counter() - started)
