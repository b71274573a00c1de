import sys

from .cli import main

if __name__ == "__main__":  # a spawned child process (CUDA isolation) imports this module: no second run
    sys.exit(main())
