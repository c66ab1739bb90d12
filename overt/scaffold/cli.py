"""``overt init NAME``: create a small project (recipe, config, smoke tests, lint settings)."""

from __future__ import annotations

import argparse

from overt.command import command

HELP = """\
Create a small overt project in the folder NAME (which must not exist or be empty):

  recipe.py                 build(cfg) -> overt.Recipe (an MLP on scikit-learn data, no download)
  config.yaml               the run's settings, naming the recipe
  tests/test_smoke.py       smoke tests with overt.testing and its pytest plugin
  pyproject.toml            [tool.overt] for overt lint and the guards, pytest settings
  .pre-commit-config.yaml   overt lint on every commit

It passes its own tests and `overt lint` as created.
"""


@command("overt init")
def main(argv: list[str]) -> int:
    from overt.scaffold.project import create_project

    parser = argparse.ArgumentParser(prog="overt init", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("name", help="the project folder to create")
    args = parser.parse_args(argv)
    files = create_project(args.name)
    for path in files:
        print(f"created {path}")
    print(f"\nnext:  cd {args.name} && overt train config.yaml && pytest && overt lint .")
    return 0
