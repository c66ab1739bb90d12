"""Audio normalised twice at inference: training reads 16-bit samples and divides them by
``MAX_WAV_VALUE`` (32768), but the inference path loads with a library that already returns floats
in [-1, 1] and still divides by ``MAX_WAV_VALUE``, so the model hears a signal 32768 times quieter.

Source: NVIDIA/mellotron#65 (https://github.com/NVIDIA/mellotron/issues/65), "Inference bug?": "While
librosa.core.load() returns float array, these is no need to norm by MAX_WAV_VALUE?"; the
maintainer: "Very nice catch, thank you! We've updated the repo."  Here a tone classifier is
trained on int16 clips divided by 32768; at inference the clips come from a float loader (the same
audio, already in [-1, 1]); the buggy path divides by ``MAX_WAV_VALUE`` again, the twin does not.

Metric: accuracy on the inference clips (plain ``python``, CPU, seed 0): bug 0.13, twin 1.0.
"""

from tests.wild.cases.common import AUDIO, FIT

REPORT = "N47"
MECHANISM = "eval-input-skew"
SLUGS = ()
METRIC = ("test_accuracy", 0.13, 1.0)

_SCRIPT = AUDIO + FIT + '''
MAX_WAV_VALUE = 32768.0


def load_wav_int16(wave):
    """What scipy.io.wavfile.read returns for a 16-bit file: integer samples."""
    return (wave * 12000).round().clamp(-32768, 32767)


def load_wav_float(wave):
    """What librosa.load returns for the same file: floats in [-1, 1]."""
    return load_wav_int16(wave) / MAX_WAV_VALUE


wave, y = tones(1500)
audio_norm = load_wav_int16(wave) / MAX_WAV_VALUE                   # training: int16 -> [-1, 1]
model = nn.Sequential(nn.Linear(CLIP // 2 + 1, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(TensorDataset(spectrum(audio_norm), y), batch_size=64, shuffle=True), 4)

test_wave, test_y = tones(400)                                    # other recordings
audio = load_wav_float(test_wave)
__NORM__
model.eval()
with torch.no_grad():
    acc = (model(spectrum(audio)).argmax(1) == test_y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    norm = "audio = audio / MAX_WAV_VALUE                                    # as in training" if bug \
        else "# already in [-1, 1]"
    return _SCRIPT.replace("__NORM__", norm)
