"""SimSiam without the stop-gradient on the projections: the loss ``-cos(p1, z2) - cos(p2, z1)``
is minimised through both branches, and the encoder finds the trivial solution (every input mapped
to nearly the same vector).  The loss goes to its minimum and the representation is useless.

Source: lightly-ai/lightly#559 (https://github.com/lightly-ai/lightly/issues/559, closed), "The
gradient of projection haven't been detached in this implementation of SimSiam": "The projection
`z0` and `z1` of raw output of backbone in SimSiam should be detached. As the version of
facebookresearch/simsiam ... the projection's gradients have been detached"; also
PatrickHua/SimSiam#39 ("The 'stop_gradient' part of the network is absent ... This model is
effectively training both the path").  Here SimSiam is trained on digits with two augmented views
(random shifts of up to one pixel and Gaussian noise); the twin detaches ``z`` in the loss.  The
metric is the SimSiam paper's own collapse measure (its Fig. 2): the per-dimension standard
deviation of the l2-normalised projections of the validation digits, about 1/sqrt(d) when the
outputs spread over the sphere and 0 when they collapse.  (A cosine 1-NN probe does not separate
the two here: 0.91 against 0.92 on the encoder's features, 0.84 against 0.85 on the projections; on
8x8 digits even raw pixels make a good nearest-neighbour classifier, and a near-collapsed projection
keeps the order of its tiny differences.)

Metric: spread of the normalised projections, validation digits (plain ``python``, CPU, seed 0):
bug 0.0167, twin 0.1073.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N59"
MECHANISM = "stop-gradient-missing"
SLUGS = ()
METRIC = ("projection_spread", 0.0167, 0.1073)

_SCRIPT = PRELUDE + '''

def augment(x):
    img = x.view(-1, 1, 8, 8)
    dx, dy = torch.randint(-1, 2, (2,)).tolist()
    img = torch.roll(img, shifts=(dy, dx), dims=(2, 3))
    return (img + 0.1 * torch.randn_like(img)).view(-1, 64)


class SimSiam(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 64))
        self.projector = nn.Sequential(nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64))
        self.predictor = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 64))

    def forward(self, x1, x2):
        z1, z2 = self.projector(self.encoder(x1)), self.projector(self.encoder(x2))
        return self.predictor(z1), self.predictor(z2), z1, z2


def D(p, z):
    return -F.cosine_similarity(p, __TARGET__, dim=-1).mean()


model = SimSiam()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
#@guard
loader = DataLoader(train_ds, batch_size=128, shuffle=True, drop_last=True)
for epoch in range(10):
    for xb, _ in loader:
        p1, p2, z1, z2 = model(augment(xb), augment(xb))
        loss = D(p1, z2) / 2 + D(p2, z1) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.3f}")

model.eval()
with torch.no_grad():
    z = F.normalize(model.projector(model.encoder(X[1400:])), dim=1)
    spread = z.std(0).mean().item()                               # 1/sqrt(64) = 0.125 if spread evenly, 0 if collapsed
print(f"METRIC {spread:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TARGET__", "z" if bug else "z.detach()")
