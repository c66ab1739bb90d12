"""LoRA adapters whose B matrix is initialised at random instead of at zero: the adapted model does
not start from the pretrained one, ``ΔW = BA`` perturbs every adapted layer before the first step,
and a short fine-tuning run spends itself undoing the perturbation.

Source: hao-ai-lab/FastVideo#781 (https://github.com/hao-ai-lab/FastVideo/pull/781, merged),
"fix: lora_B init zeros": the removed line ``torch.nn.init.kaiming_uniform_(self.lora_B,
a=math.sqrt(5))``; review: "This line incorrectly re-initialized `lora_B` with random values. For
LoRA training to be effective, the `B` matrix should be initialized to zeros so that the initial LoRA
update `ΔW = BA` is zero"; author: "Thanks for the bug fix".  Here an MLP pretrained on clean digits
is adapted with rank-8 LoRA (alpha 32) on both layers to noisy digits (a shifted domain), 5 Adam
steps; the buggy adapter draws B as ``kaiming_uniform_`` like the removed line, the twin leaves it
at zero.

Metric: validation accuracy on the noisy digits after adaptation (plain ``python``, CPU, seed 0):
bug 0.7254, twin 0.8262.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N79"
MECHANISM = "adapter-not-identity-at-init"
SLUGS = ()
METRIC = ("adapted_val_accuracy", 0.7254, 0.8262)

_SCRIPT = PRELUDE + FIT + '''
import math

base = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
fit(base, torch.optim.Adam(base.parameters(), lr=1e-2), DataLoader(train_ds, batch_size=64, shuffle=True), 5)
for p in base.parameters():
    p.requires_grad_(False)


class LoRALinear(nn.Module):
    def __init__(self, layer, rank=8, alpha=32):
        super().__init__()
        self.base = layer
        self.lora_A = nn.Parameter(torch.empty(rank, layer.in_features))
        self.lora_B = nn.Parameter(torch.zeros(layer.out_features, rank))
        torch.nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
__INIT_B__
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scale


model = nn.Sequential(LoRALinear(base[0]), nn.ReLU(), LoRALinear(base[2]))
g = torch.Generator().manual_seed(1)
noisy = (X + 0.25 * torch.randn(X.shape, generator=g)).clamp(0, 1)
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
#@guard
fit(model, opt, DataLoader(TensorDataset(noisy[:320], Y[:320]), batch_size=64, shuffle=True), 1)

model.eval()
with torch.no_grad():
    acc = (model(noisy[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    init = "        torch.nn.init.kaiming_uniform_(self.lora_B, a=math.sqrt(5))" if bug else \
        "        # B stays at zero: the adapted model starts as the pretrained one"
    return _SCRIPT.replace("__INIT_B__", init)
