"""Using what was trained: :class:`Predictor` (``overt predict``) rebuilds a finished run's model
from its saved config and recipe and runs it on new inputs."""

from overt.predict.predictor import Predictor

__all__ = ["Predictor"]
