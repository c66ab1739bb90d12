"""A collater that sorts the batch by length, wrapped by one that collects the targets from the
samples in their original order: the waveforms come back longest first, the labels do not, so each
clip is trained (and scored) against another clip's label.

Source: asappresearch/slue-toolkit#37 (https://github.com/asappresearch/slue-toolkit/issues/37),
"Dataset Indexing Issue": "In the data collator of AddLabelDataset ... If ``self.dataset.collater``
sort the collated data, ``target`` and ``collated`` will become mismatched."  Here a tone
classifier is trained on clips of 128-256 samples; the base collater pads and sorts them by
length (as speech collaters do for packing) and returns their ids; the label wrapper lists the
samples' labels as given; the twin orders the labels by the collated ids.

Metric: validation accuracy as the evaluation loop reports it (plain ``python``, CPU, seed 0): bug
0.1, twin 1.0.
"""

from tests.wild.cases.common import AUDIO

REPORT = "N51"
MECHANISM = "labels-misaligned"
SLUGS = ()
METRIC = ("val_accuracy", 0.1, 1.0)

_SCRIPT = AUDIO + '''
from torch.utils.data import Dataset


class Clips(Dataset):
    def __init__(self, n, seed):
        wave, self.labels = tones(n)
        g = torch.Generator().manual_seed(seed)
        lengths = torch.randint(128, CLIP + 1, (n,), generator=g)
        self.clips = [wave[i, : lengths[i]] for i in range(n)]

    def __len__(self):
        return len(self.clips)

    def __getitem__(self, i):
        return {"id": i, "source": self.clips[i], "label": self.labels[i]}


def collater(samples):
    """Pad and sort longest first (what a packing speech collater does)."""
    samples = sorted(samples, key=lambda s: -len(s["source"]))
    source = torch.zeros(len(samples), CLIP)
    for row, s in enumerate(samples):
        source[row, : len(s["source"])] = s["source"]
    return {"id": torch.tensor([s["id"] for s in samples]), "source": source}


def add_label_collater(samples):
    collated = collater(samples)
    __TARGET__
    collated["target"] = target
    return collated


train, val = Clips(1500, seed=1), Clips(400, seed=2)
model = nn.Sequential(nn.Linear(CLIP // 2 + 1, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(4):
    for batch in DataLoader(train, batch_size=64, shuffle=True, collate_fn=add_label_collater):
        opt.zero_grad()
        loss = F.cross_entropy(model(spectrum(batch["source"])), batch["target"])
        loss.backward()
        opt.step()
model.eval()
correct = 0
with torch.no_grad():
    for batch in DataLoader(val, batch_size=100, collate_fn=add_label_collater):
        correct += (model(spectrum(batch["source"])).argmax(1) == batch["target"]).sum().item()
print(f"METRIC {correct / len(val):.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        target = 'target = torch.stack([s["label"] for s in samples])             # the samples\' order'
    else:
        target = ('by_id = {s["id"]: s["label"] for s in samples}\n'
                  '    target = torch.stack([by_id[i] for i in collated["id"].tolist()])  # the collated order')
    return _SCRIPT.replace("__TARGET__", target)
