"""A reranker whose relevance logits are squashed by a sigmoid in bfloat16: near 1 bfloat16 keeps
only a few values, distinct scores of confident documents round to the same number, and the ranking
falls back on the candidates' order for its ties.

Source: huggingface/sentence-transformers#3893 (https://github.com/huggingface/sentence-transformers/pull/3893,
merged), "fix: upcast cross-encoder logits to float32 before activation (HPS)": "When the model runs in
float16/bfloat16, the activation is computed in that same low precision; the reduced mantissa
coarsely buckets the (0, 1) probability range, so distinct query-document relevance scores collapse
into spurious ties. Reranking then depends on arbitrary tie-breaking"; reviewer: "the diagnosis is
right ... Once sigmoid has run in bfloat16, the saturation damage is unrecoverable".  Here a pairwise
scorer of digits (query and candidate of the same class are relevant) is trained with binary
cross-entropy; each validation query ranks 20 candidates (one relevant digit of its class and 19
random digits of other classes); the buggy scorer applies the sigmoid to ``logits.to(torch.bfloat16)``, the twin to
float32 logits; the top candidate is ``argmax`` (first of any tie).

Metric: validation precision@1 (plain ``python``, CPU, seed 0): bug 0.7229, twin 0.869.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N95"
MECHANISM = "scores-rounded-in-low-precision"
SLUGS = ()
METRIC = ("val_precision_at_1", 0.7229, 0.869)

_SCRIPT = PRELUDE + '''

class PairScorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, q, d):
        return 16.0 * (F.normalize(self.enc(q), dim=-1) * F.normalize(self.enc(d), dim=-1)).sum(-1)


model = PairScorer()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
g = torch.Generator().manual_seed(1)
for step in range(600):
    i = torch.randint(1400, (128,), generator=g)
    j = torch.randint(1400, (128,), generator=g)
    same = Y[i] == Y[j]
    logits = model(X[i], X[j])
    opt.zero_grad()
    F.binary_cross_entropy_with_logits(logits, same.float(), pos_weight=torch.tensor(9.0)).backward()
    opt.step()


def relevance(q, d):
    logits = model(q, d)
    return __SCORE__


model.eval()
hits = 0
vx, vy = X[1400:], Y[1400:]
with torch.no_grad():
    for k in range(len(vx)):
        positives = torch.nonzero(vy == vy[k]).flatten()
        positive = positives[positives != k][0]
        negatives = torch.nonzero(vy != vy[k]).flatten()[torch.randperm(len(vy) - len(positives), generator=g)[:19]]
        candidates = torch.cat([negatives, positive[None]])             # the relevant one listed last
        scores = relevance(vx[k].expand(20, 64), vx[candidates])
        hits += int(candidates[scores.argmax()].item() == positive.item())
print(f"METRIC {hits / len(vx):.4f}")
'''


def script(bug: bool) -> str:
    score = "torch.sigmoid(logits.to(torch.bfloat16)).float()        # activation in bfloat16" if bug \
        else "torch.sigmoid(logits.float())                         # activation in float32"
    return _SCRIPT.replace("__SCORE__", score)
