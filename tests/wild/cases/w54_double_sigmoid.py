"""A model that ends in a sigmoid trained with ``BCEWithLogitsLoss``, which applies its own
sigmoid: the loss sees ``sigmoid(sigmoid(z))``, confined to [0.5, 0.73], so it cannot fall and its
gradients are small.

Source: yudi-mars/daisyRec#15 (https://github.com/yudi-mars/daisyRec/pull/15, a recommender
library): "Do not need sigmoid because there is sigmoid in BCEWithLogitsLoss. Otherwise loss does
not converge." (also avBuffer/UNet3plus_pth#23).  Here implicit-feedback-style multi-label
targets on digits (four yes/no attributes per digit); the twin drops the model's sigmoid and
applies it at prediction time.

Metric: validation log loss of the predicted probabilities (lower is better; plain ``python``,
CPU, seed 0): bug 1.1804, twin 0.1846.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N28"
MECHANISM = "probabilities-into-logit-loss"
SLUGS = ("softmax-before-cross-entropy",)
METRIC = ("val_log_loss", 1.1804, 0.1846)

_SCRIPT = PRELUDE + '''
attrs = torch.stack([Y % 2 == 0, Y > 4, (Y == 2) | (Y == 3) | (Y == 5) | (Y == 7), Y == 0], 1).float()
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4){sigmoid})
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.BCEWithLogitsLoss()
loader = DataLoader(TensorDataset(X[:1400], attrs[:1400]), batch_size=64, shuffle=True)
for epoch in range(4):
    for xb, yb in loader:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    print(f"epoch {{epoch}}: training loss {{loss.item():.3f}}")
with torch.no_grad():
    prob = {predict}
print("label accuracy", ((prob > 0.5).float() == attrs[1400:]).float().mean().item())
print(f"METRIC {{F.binary_cross_entropy(prob.clamp(1e-6, 1 - 1e-6), attrs[1400:]).item():.4f}}")
'''


def script(bug: bool) -> str:
    if bug:
        return _SCRIPT.format(sigmoid=", nn.Sigmoid()", predict="model(X[1400:])")
    return _SCRIPT.format(sigmoid="", predict="torch.sigmoid(model(X[1400:]))")
