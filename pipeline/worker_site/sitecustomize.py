"""Start-up hook of the processes bertprep starts, imported by Python's ``site`` because this
directory is on their PYTHONPATH (``pipeline.quiet.quiet_subprocesses``).

With ``BERTPREP_QUIET`` set, it gives the root logger one stderr handler that passes errors only,
before anything else runs. Beam's SDK worker logs start-up chatter (``apitools not found``,
``Logging handler created``, ``No semi_persistent_directory found``, ``Discarding unparseable
args``) through the root logger, which otherwise gets a WARNING-and-up stderr handler on the
first ``logging.warning`` call and then INFO from the harness; every record still goes to the
runner through Beam's own log handler. Then runs any other ``sitecustomize`` on the path.
"""

import logging
import os
import sys

if os.environ.get("BERTPREP_QUIET"):
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setLevel(logging.ERROR)
    _handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    logging.getLogger().addHandler(_handler)


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_chain()
