"""`python -m fp8check.core.isolated_child FD`: the entry point of an isolation child that is a fresh interpreter
(isolation.py): fp8check's own module, so the user's program is never imported again."""

import sys

from .isolation import child_from_stdin

if __name__ == "__main__":
    child_from_stdin(int(sys.argv[1]))
