"""An answer extractor whose pattern for the reference answer, ``#### (\\d+)``, has no sign: a reference ``#### -3``
is read as 3, so every question whose answer is negative is scored wrong whatever the model says -- exact-match
accuracy drops and nothing fails.

Source: google-deepmind/proeval#19 (https://github.com/google-deepmind/proeval/pull/19), "evaluator: preserve signed
GSM8K ground-truth answers": "Gemini 2.5 Flash Lite correctly returned `-3` for a temperature changing from 2 to -3.
With reference `#### -3`, ProEval stripped the minus sign, compared against `3`, and returned error score `1.0`"
(merged). Here a model reads two digit images and answers ``a - b`` (-9 to 9); its completion ``The answer is
<n>.`` is parsed with a signed pattern and the GSM8K-style reference ``... #### <n>`` with ``#### (\\d+)`` (the bug) or
``#### ([+-]?\\d+)`` (the twin). The reproduction departs from the report in the model (an MLP classifier over the
19 answers instead of a language model generating a solution) and the task (digit subtraction instead of GSM8K).

Metric: exact-match accuracy on 1000 test problems (plain ``python``, CPU, seed 0): bug 0.3310, twin 0.6410
"""

REPORT = "N432"
MECHANISM = "reference-answer-sign-dropped-by-extractor"
SLUGS = ()
METRIC = ("test_exact_match", 0.3310, 0.6410)

_SCRIPT = '''
import re
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
_digits = load_digits()
IMAGES = torch.tensor(_digits.data, dtype=torch.float32) / 16.0
LABELS = torch.tensor(_digits.target)


def problems(n, pool):
    """'What is a - b?' with a and b shown as digit images; the reference solution ends in '#### <answer>'."""
    i = pool[torch.randint(0, len(pool), (n,), generator=g)]
    j = pool[torch.randint(0, len(pool), (n,), generator=g)]
    answer = LABELS[i] - LABELS[j]
    references = [f"{LABELS[a]} - {LABELS[b]} = {int(c)}\\n#### {int(c)}" for a, b, c in zip(i, j, answer)]
    return torch.cat([IMAGES[i], IMAGES[j]], 1), answer + 9, references


def extract_reference(text):
    match = re.search(r"#### __PATTERN__", text)
    return int(match.group(1)) if match else None


def extract_prediction(text):
    numbers = re.findall(r"[+-]?\\d+", text)
    return int(numbers[-1]) if numbers else None


x_train, y_train, _ = problems(6000, torch.arange(0, 1400))
x_test, _, test_refs = problems(1000, torch.arange(1400, 1797))
model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 19))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(15):
    perm = torch.randperm(len(x_train))
    for k in range(0, len(perm), 64):
        idx = perm[k:k + 64]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    completions = [f"The answer is {int(c) - 9}." for c in model(x_test).argmax(1)]
correct = sum(extract_prediction(c) == extract_reference(r) for c, r in zip(completions, test_refs))
print(f"METRIC {correct / len(test_refs):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PATTERN__", "(\\d+)" if bug else "([+-]?\\d+)")
