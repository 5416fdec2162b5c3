from miner.cli.app import app

app(prog_name="miner")
