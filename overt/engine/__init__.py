"""The training engine: a canonical loop with production concerns plugged in.

Modules: ``loop`` (Trainer), ``state`` (TrainState), ``device`` (device
choice, batch moves), ``data`` (seeded resumable sampler, loaders),
``accumulation`` (window plan), ``precision`` (autocast, GradScaler),
``evaluate`` (validation), ``metrics``, ``seeding``, ``callbacks`` (the plug-in contract),
``memory`` (activation checkpointing), ``explain`` (errors in forward/loss).  The engine imports none of its plug-ins: the default
set is composed above it, in :mod:`overt.compose`.
"""
