from miner.cli import app

app(prog_name="miner")
