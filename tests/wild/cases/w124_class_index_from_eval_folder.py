"""Class indices assigned from the sorted folder names of each split on its own: the test split
lacks one class, every class after it in sorted order shifts down by one index, and the model's
correct predictions for those classes are scored as wrong.

Source: ultralytics/ultralytics#13936 (https://github.com/ultralytics/ultralytics/issues/13936,
labels: bug, fixed), "Matching tag on classify validation": "my test set only get 3 of 4 classes ...
I realized that the classes weren't managed by the name of the folders containing the images, but by
their order. In my case, the order was: 0,270,180,90. However, 180 didn't exist, so the images
contained in 90 were taken to be 180-true images, which is obviously not the case."  Here the digits
are laid out as one folder per class name ("0" ... "9") for a training and a test split, and the test
split happens to hold no "3"; the buggy loader builds ``class_to_idx`` from each split's own folders,
the twin reuses the training split's mapping.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.3045, twin 0.919.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N98"
MECHANISM = "class-index-map-per-split"
SLUGS = ()
METRIC = ("test_accuracy", 0.3045, 0.919)

_SCRIPT = PRELUDE + FIT + '''
import os
import shutil
import tempfile

root = tempfile.mkdtemp()
for split, xs, ys in (("train", X[:1400], Y[:1400]), ("test", X[1400:], Y[1400:])):
    for name in sorted({str(int(y)) for y in ys}):
        if split == "test" and name == "3":
            continue                                           # no "3" in this test split
        os.makedirs(os.path.join(root, split, name))
        torch.save(xs[ys == int(name)].clone(), os.path.join(root, split, name, "images.pt"))


def find_classes(directory):
    names = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    return {name: i for i, name in enumerate(names)}


def image_folder(directory, class_to_idx):
    xs, ys = [], []
    for name, idx in class_to_idx.items():
        path = os.path.join(directory, name, "images.pt")
        if os.path.exists(path):
            images = torch.load(path, weights_only=True)
            xs.append(images)
            ys.append(torch.full((len(images),), idx))
    return TensorDataset(torch.cat(xs), torch.cat(ys))


train_classes = find_classes(os.path.join(root, "train"))
train_folder = image_folder(os.path.join(root, "train"), train_classes)
test_folder = image_folder(os.path.join(root, "test"), __TEST_MAP__)
shutil.rmtree(root)

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(train_folder, batch_size=64, shuffle=True), 5)

model.eval()
xs, ys = test_folder.tensors
with torch.no_grad():
    acc = (model(xs).argmax(1) == ys).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TEST_MAP__", 'find_classes(os.path.join(root, "test"))' if bug else "train_classes")
