"""Softmax at the end of ``forward`` and ``nn.CrossEntropyLoss`` on its output: softmax twice.

Source: Stack Overflow, "Should I use softmax as output when using cross entropy loss in pytorch?"
(https://stackoverflow.com/questions/55675345).
"""

from tests.wild.cases.common import NET, loop

SLUGS = ("softmax-before-cross-entropy",)


def script(bug: bool) -> str:
    if not bug:
        return loop()
    return loop(net=NET.replace("return self.fc2(self.drop(F.relu(self.fc1(x))))",
                                "return F.softmax(self.fc2(self.drop(F.relu(self.fc1(x)))), dim=1)"))
