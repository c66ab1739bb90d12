"""LoRA weights merged twice: ``merge()`` adds ``scale * B @ A`` to the base weight and is not
idempotent, so a second merge (an explicit one, then the one inside ``merge_and_unload``) adds the
fine-tuning delta again, and the exported model applies twice the adaptation it learned.

Source: huggingface/peft#1355 (https://github.com/huggingface/peft/pull/1355, merged), "FIX: Make
merging of adapter weights idempotent": "Right now, merging of adapters weights such as LoRA and IA³
is not idempotent. This means that if a user calls `merge` multiple times, the resulting weights will
be different each time because the delta weights are added again and again. ... This bug is more
subtle than it may seem at first, since we sometimes merge implicitly without the user necessarily
being aware of it (e.g. when calling `merge_and_unload`)."  Here an MLP pretrained on digits is
adapted with rank-8 LoRA layers to a new domain (the digits shifted two pixels to the right, on which
the pretrained model scores 0.12), then
exported with ``merge_and_unload``; the buggy script also merges explicitly before exporting (the
LoRA layer here merges as PEFT's did before the fix), the twin merges once.

Metric: validation accuracy of the exported model on the new domain (plain ``python``, CPU, seed 0):
bug 0.67, twin 0.8589.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N62"
MECHANISM = "adapter-merged-twice"
SLUGS = ()
METRIC = ("val_accuracy", 0.67, 0.8589)

_SCRIPT = PRELUDE + FIT + '''

class LoRALinear(nn.Module):
    def __init__(self, base, r=8, alpha=16):
        super().__init__()
        self.base = base
        self.A = nn.Parameter(torch.randn(r, base.in_features) * 0.1)
        self.B = nn.Parameter(torch.zeros(base.out_features, r))
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T

    def merge(self):
        with torch.no_grad():
            self.base.weight += self.scale * self.B @ self.A


def merge_adapters(model):
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.merge()


def merge_and_unload(model):
    merge_adapters(model)
    return nn.Sequential(*[m.base if isinstance(m, LoRALinear) else m for m in model])


pretrained = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
fit(pretrained, torch.optim.Adam(pretrained.parameters(), lr=1e-2),
    DataLoader(train_ds, batch_size=64, shuffle=True), 3)
for p in pretrained.parameters():
    p.requires_grad_(False)

def shift(x):
    return torch.roll(x.view(-1, 8, 8), shifts=2, dims=2).view(-1, 64)


new_train = TensorDataset(shift(X[:1400]), Y[:1400])
model = nn.Sequential(LoRALinear(pretrained[0]), nn.ReLU(), LoRALinear(pretrained[2]))
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
#@guard
fit(model, opt, DataLoader(new_train, batch_size=64, shuffle=True), 4)

__MERGE__exported = merge_and_unload(model)
exported.eval()
with torch.no_grad():
    acc = (exported(shift(X[1400:])).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MERGE__", "merge_adapters(model)  # for evaluation\n"
                           if bug else "")
