"""Imports the generated gRPC stubs (trainer_pb2, trainer_pb2_grpc).

They are generated at build time into <build>/trainer_bridge/python (never committed); the
directory comes from FLOTILLA_PROTO_PY, or is searched next to the source tree's build dir.
"""
import os
import sys


def _stub_dir():
    env = os.environ.get("FLOTILLA_PROTO_PY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.abspath(os.path.join(here, "..", "..", ".."))
    return os.path.join(os.environ.get("FLOTILLA_BINARY_DIR", os.path.join(root, "build")), "trainer_bridge", "python")


_dir = _stub_dir()
if not os.path.exists(os.path.join(_dir, "trainer_pb2.py")):
    raise ImportError(f"generated stubs not found in {_dir}: build the flotilla_trainer_py target "
                      "or set FLOTILLA_PROTO_PY")
if _dir not in sys.path:
    sys.path.insert(0, _dir)

import trainer_pb2 as pb  # noqa: E402,F401
import trainer_pb2_grpc as pb_grpc  # noqa: E402,F401
