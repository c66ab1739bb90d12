"""Softmax at the end of ``forward`` and ``nn.CrossEntropyLoss`` on its output: softmax twice.

Source: jindongwang/Deep-learning-activity-recognition#10
(https://github.com/jindongwang/Deep-learning-activity-recognition/issues/10: ``F.softmax`` fed to
``nn.CrossEntropyLoss``, confirmed by the author) and ariecattan/SciCo#2
(https://github.com/ariecattan/SciCo/issues/2: the double softmax bounds the loss from below).
"""

from tests.wild.cases.common import NET, loop

SLUGS = ("softmax-before-cross-entropy",)


def script(bug: bool) -> str:
    if not bug:
        return loop()
    return loop(net=NET.replace("return self.fc2(self.drop(F.relu(self.fc1(x))))",
                                "return F.softmax(self.fc2(self.drop(F.relu(self.fc1(x)))), dim=1)"))
