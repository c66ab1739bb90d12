"""Small framework projects (Lightning, Hugging Face Trainer, Accelerate) on scikit-learn's digits:
each clean, or with one planted catalog bug (``bug=...``).  They run in seconds on a CPU."""
