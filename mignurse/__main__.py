from mignurse.entry import run

if __name__ == "__main__":  # not in the spawned workers that mask secrets
    run()
