"""``overt init NAME``: a small project that trains, tests and lints cleanly from its first minute."""

from overt.scaffold.project import create_project

__all__ = ["create_project"]
