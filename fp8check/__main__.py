from .cli import entry

if __name__ == "__main__":  # a spawned child process (CUDA isolation) imports this module: no second run
    entry()
