"""A complete user recipe: wine cultivar classification (scikit-learn's load_wine)."""
import torch
from torch import nn
from torch.utils.data import TensorDataset

import overt

defaults = {"epochs": 30, "batch_size": 16, "lr": 1e-2, "hidden": 32,
            "monitor": "val/accuracy", "monitor_mode": "max"}


def build(cfg):
    from sklearn.datasets import load_wine
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    x, y = load_wine(return_X_y=True)
    x_tr, x_va, y_tr, y_va = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    scaler = StandardScaler().fit(x_tr)
    as_data = lambda a, b: TensorDataset(torch.tensor(scaler.transform(a), dtype=torch.float32), torch.tensor(b))
    model = nn.Sequential(nn.Linear(13, cfg.hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(cfg.hidden, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    return overt.Recipe(
        model=model, optimizer=optimizer, loss_fn=nn.CrossEntropyLoss(),
        train_data=as_data(x_tr, y_tr), val_data=as_data(x_va, y_va),
        scheduler=torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5),
        scheduler_interval="epoch",
        metrics={"accuracy": overt.metrics.accuracy},
    )
