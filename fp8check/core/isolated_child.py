"""`python -m fp8check.core.isolated_child --serve FD`: the start server of isolation children that hold CUDA
tensors (isolation.py): fp8check's own module, so the user's program is never imported again."""

import sys

from .isolation import serve

if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    serve(int(sys.argv[2]))
