"""Audio recorded at another sample rate fed to the model without resampling: the model reads the
samples as if they were at its training rate, so every frequency is shifted.

Source: kitzeslab/bioacoustics-model-zoo#7 (https://github.com/kitzeslab/bioacoustics-model-zoo/issues/7,
labelled a bug): "If you try to use one of the MixIT source separation models on a recording with
a sample rate other than 22050, the model interprets the audio samples as if they have a sample
rate of 22050".  Here a tone classifier trained on 1000 Hz clips is evaluated on clips recorded at
500 Hz, 256 samples at a time; the twin resamples them to 1000 Hz first.

Metric: accuracy on the 500 Hz recordings (plain ``python``, CPU, seed 0): bug 0.03,
twin 0.95.
"""

from tests.wild.cases.common import AUDIO, FIT

REPORT = "N21"
MECHANISM = "eval-input-skew"
SLUGS = ()
METRIC = ("test_accuracy", 0.03, 0.95)

_SCRIPT = AUDIO + FIT + '''
wave, y = tones(1500)
model = nn.Sequential(nn.Linear(CLIP // 2 + 1, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loader = DataLoader(TensorDataset(spectrum(wave), y), batch_size=64, shuffle=True)
fit(model, opt, loader, 4)

rec, rec_y = tones(400, sr=500, seconds=0.512)      # field recordings at 500 Hz
{prepare}
with torch.no_grad():
    acc = (model(spectrum(clips)).argmax(1) == rec_y).float().mean().item()
print(f"METRIC {{acc:.4f}}")
'''


def script(bug: bool) -> str:
    if bug:
        prepare = "clips = rec[:, :CLIP]                              # 256 samples, read as 1000 Hz"
    else:
        prepare = ("clips = F.interpolate(rec[:, None], scale_factor=SR / 500, mode='linear')[:, 0, :CLIP]"
                   "  # resampled")
    return _SCRIPT.format(prepare=prepare)
