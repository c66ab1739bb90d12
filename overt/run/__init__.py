"""The run directory and what is written into it (config, metrics, events, weights, summary)."""
