"""A small image-classification package: model, training loop and helpers in three modules."""
