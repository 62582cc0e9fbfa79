from mignurse.cli import run

run()
