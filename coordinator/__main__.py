from coordinator.cli.app import app

app(prog_name="coordinator")
