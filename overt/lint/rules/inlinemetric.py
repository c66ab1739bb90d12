"""OVT824 ``metric-off-definition`` as a lint rule: metrics written inline, whose formula the code shows.

The runtime check (:mod:`overt.guards.metricdef`) recomputes functions named after a metric on their own
calls; a metric written inline in an evaluation loop has no function to call again.  Here the code itself
proves the formula wrong, in four forms (one module each): a confusion-count metric whose formula is not
the one its name or label says (:mod:`.countformula`), an absolute or squared error of two unsigned-integer
arrays (:mod:`.unsigneddiff`), an NDCG whose ideal DCG is the retrieved list re-sorted (:mod:`.idealdcg`), a
top-k list of item ids padded with item 0 and scored whole (:mod:`.padids`), a value named after one
confusion-count metric computed by another's function (:mod:`.crossmetric`), an MRR computed as the
reciprocal of the mean rank (:mod:`.reciprocalmean`), a ratio-of-totals metric (an error rate, an accuracy, an
ECE) taken as the unweighted mean of per-group values (:mod:`.groupmean`), a ranking metric's relevant set
built from evaluation rows the code itself reads as labelled, negatives included (:mod:`.relevantrows`), true
positives or negatives read from the wrong cell of a binary confusion matrix (:mod:`.cmlayout`).
"""

from __future__ import annotations

from collections.abc import Iterator

from overt.lint.index import FileIndex
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.cmlayout import misread_cells
from overt.lint.rules.countformula import count_formulas
from overt.lint.rules.crossmetric import crossed_metrics
from overt.lint.rules.groupmean import unweighted_group_means
from overt.lint.rules.idealdcg import ideal_from_retrieved
from overt.lint.rules.padids import padded_ids
from overt.lint.rules.reciprocalmean import reciprocal_of_mean_rank
from overt.lint.rules.relevantrows import relevant_rows_unlabelled
from overt.lint.rules.unsigneddiff import unsigned_differences


@rule("metric-off-definition")
def metric_off_definition(ix: FileIndex) -> Iterator[Hit]:
    """Inline metrics whose formula the code proves is not the metric they are named for."""
    yield from count_formulas(ix)
    yield from unsigned_differences(ix)
    yield from ideal_from_retrieved(ix)
    yield from padded_ids(ix)
    yield from crossed_metrics(ix)
    yield from reciprocal_of_mean_rank(ix)
    yield from unweighted_group_means(ix)
    yield from relevant_rows_unlabelled(ix)
    yield from misread_cells(ix)
