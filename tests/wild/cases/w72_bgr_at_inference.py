"""Images read in BGR channel order at inference for a model trained on RGB: OpenCV's ``imread``
returns blue, green, red, so the model sees red where there was blue and the other way round.

Source: pixelite1201/CameraHMR#20 (https://github.com/pixelite1201/CameraHMR/issues/20): "the image
input to the `cam_model` is in **BGR** format since it is read using OpenCV (cv2), but I expect it
to be in **RGB**. Is this a bug"; the maintainer: "Thanks for reporting. Its fixed now."  Simulated
without image files: the training images are RGB arrays (as PIL decodes them), and the inference
helper returns them with the channel axis reversed, as ``cv2.imread`` does; the task is the colour
of a digit drawn in one of six colours.  The twin converts BGR to RGB before the model.

Metric: accuracy on the inference images (plain ``python``, CPU, seed 0): bug 0.3451, twin 1.0.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N46"
MECHANISM = "eval-input-skew"
SLUGS = ()
METRIC = ("test_accuracy", 0.3451, 1.0)

_SCRIPT = PRELUDE + FIT + '''
COLOURS = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=torch.float32)
g = torch.Generator().manual_seed(1)
colour = torch.randint(len(COLOURS), (len(X),), generator=g)
ink = X.reshape(-1, 1, 8, 8)
rgb = ink * COLOURS[colour][:, :, None, None] * (0.6 + 0.4 * torch.rand(len(X), 1, 1, 1, generator=g))
rgb = rgb + 0.1 * torch.rand(rgb.shape, generator=g)               # (N, 3, 8, 8), channels R, G, B


def imread_bgr(i):
    """What cv2.imread gives for image i: the same pixels, channels in B, G, R order."""
    return rgb[i].flip(0)


model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64, 64), nn.ReLU(), nn.Linear(64, len(COLOURS)))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(TensorDataset(rgb[:1400], colour[:1400]), batch_size=64, shuffle=True), 3)

model.eval()
images = torch.stack([imread_bgr(i) for i in range(1400, len(X))])
__CONVERT__
with torch.no_grad():
    acc = (model(images).argmax(1) == colour[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    convert = "# fed as read" if bug else "images = images.flip(1)                          # BGR -> RGB"
    return _SCRIPT.replace("__CONVERT__", convert)
