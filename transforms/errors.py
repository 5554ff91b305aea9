"""The one base of every error a user can fix (a bad flag, config key, input or file).

Importable from every layer (no Beam, TensorFlow or Keras). ``pipeline.cli.main`` catches it once
and prints ``bertprep COMMAND: error: MESSAGE`` on stderr with exit status 2, no traceback; so the
message must say what is wrong and, where it can, how to fix it. Failures that are not the
user's to fix (a runner that lost records, a bug) are not ``UserError`` and keep their traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; the message names the flag, key, file or record at fault."""
