"""overt's engine pieces inside your own loop: seeding, a resumable data order,
precision with loss scaling, correct accumulation, and validation that restores modes.

    python examples/pieces_in_a_hand_written_loop.py [--precision fp16] [--accumulate 4]
"""

import argparse

import torch
from torch import nn

from overt.engine.accumulation import WindowPlan
from overt.engine.data import batch_sizes, build_loader, set_loader_epoch
from overt.engine.device import move_to_device, pick_device
from overt.engine.evaluate import evaluate
from overt.engine.metrics import accuracy
from overt.engine.precision import Precision
from overt.engine.seeding import seed_everything
from overt.recipes.digits import load_digits_split


def main() -> float:
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--accumulate", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=8)
    args = parser.parse_args()

    seed_everything(0)
    device = pick_device("auto")
    train, val = load_digits_split(0.2, 0)
    loader = build_loader(train, batch_size=32, shuffle=True, seed=0)
    val_loader = build_loader(val, batch_size=256, shuffle=False, seed=0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    precision = Precision(args.precision, device)
    plan = WindowPlan.build(batch_sizes(loader), args.accumulate)

    for epoch in range(args.epochs):
        model.train()
        set_loader_epoch(loader, epoch, seed=0)
        for i, batch in enumerate(loader):
            x, y = move_to_device(batch, device)
            with precision.autocast():
                loss = loss_fn(model(x), y)
            precision.backward(loss * plan.weights[i])
            if plan.closes[i]:
                precision.unscale(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                precision.step(optimizer)
                optimizer.zero_grad(set_to_none=True)
        metrics = evaluate(model, val_loader, loss_fn=loss_fn, forward=lambda m, b: (m(b[0]), b[1]),
                           metrics={"accuracy": accuracy}, device=device, autocast=precision.autocast)
        print(f"epoch {epoch + 1}: " + "  ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    return metrics["val/accuracy"]


if __name__ == "__main__":
    main()
