"""The user's own frame of an exception (overt/frames.py): told apart from overt's by the package
folder, not by a folder name."""

from __future__ import annotations

from overt.frames import is_overt_file, user_frame
from overt.recipes.base import module_from_file


def test_a_users_project_in_a_folder_named_overt_is_the_users(tmp_path):
    (tmp_path / "overt").mkdir()
    path = tmp_path / "overt" / "recipe.py"
    path.write_text("def build(cfg):\n    raise ValueError('bad')\n")
    module = module_from_file(path, "_frames_test_recipe")
    try:
        module.build(None)
    except ValueError as exc:
        frame = user_frame(exc)
    assert frame is not None and frame.filename == str(path) and frame.lineno == 2
    assert not is_overt_file(str(path)) and is_overt_file(module_from_file.__code__.co_filename)


def test_overt_s_own_frames_are_skipped():
    from overt.config import resolve
    from overt.errors import ConfigError

    try:
        resolve({}, {"epochz": 1})
    except ConfigError as exc:
        frame = user_frame(exc)
    assert frame is not None and frame.filename == __file__
