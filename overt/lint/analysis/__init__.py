"""The analysis layer every lint rule shares (rules import from here, never from each other).

- :mod:`.defs`: reaching definitions for local names, per function;
- :mod:`.values`: what an expression holds, through names, ``self.X`` attributes,
  ``forward`` summaries of module classes, helper functions and parameters;
- :mod:`.project`: the other modules of the linted package, parsed once per run;
- :mod:`.events`: the training-relevant calls of a stretch of code, in order;
- :mod:`.units`: training loops and steps, evaluation regions, tensors and labels;
- :mod:`.slots`: the parameter each positional argument of a call fills, where the callee is known
  (library signatures from :mod:`.signatures_data`, the file's own functions and classes).

Everything is computed lazily and cached on the file's :class:`~overt.lint.index.FileIndex`.
"""
