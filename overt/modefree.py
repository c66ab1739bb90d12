"""The torch.nn layers whose forward is the same in training and eval mode (no dropout, no batch
statistics): shared by lint (``train-mode-in-eval``, read from the code) and the guards
(``batch-dependent-eval``, read from the live module tree).  Names only: no torch import."""

from __future__ import annotations

#: ``torch.nn`` class names whose forward never reads the mode
MODE_FREE_LAYERS = frozenset({
    "Linear", "Bilinear", "Identity", "Flatten", "Unflatten", "Embedding", "EmbeddingBag", "LayerNorm", "GroupNorm",
    "RMSNorm", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "MaxPool1d",
    "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Upsample", "PixelShuffle",
    "ReLU", "ReLU6", "LeakyReLU", "PReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Tanh", "Sigmoid",
    "Hardtanh", "Hardsigmoid", "Hardswish", "Softplus", "Softsign", "Softmax", "LogSoftmax", "Softmin", "LogSigmoid",
    "Tanhshrink", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
    "ReplicationPad1d", "ReplicationPad2d", "RNNCell", "LSTMCell", "GRUCell"})
#: ``torch.nn`` class names that are the same in both modes only with some settings (dropout 0, no running
#: statistics), checked by each user against the layer's arguments or attributes
MODE_FREE_IF_SET = frozenset({
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout", "BatchNorm1d",
    "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "MultiheadAttention",
    "LSTM", "GRU", "RNN"})
