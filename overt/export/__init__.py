"""Exporting a finished run's model (ONNX, torch.export) with a parity check against eager PyTorch."""

from overt.export.exporter import ExportResult, export_run, validation_inputs

__all__ = ["ExportResult", "export_run", "validation_inputs"]
