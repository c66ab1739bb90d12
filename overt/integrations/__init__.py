"""Integrations with other tools (each an optional extra, imported only when switched on)."""
